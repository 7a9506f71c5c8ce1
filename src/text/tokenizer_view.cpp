// Reading a tokenizer section in place. The bytes are untrusted (a model file from anywhere):
// every count is checked against the bytes left, every offset array for monotonicity and
// its end, and every id a table can hand out against the vocabulary, before anything uses
// them. All checks are linear scans of flat arrays; no string is hashed or compared, which
// is what keeps a warm model load in the low milliseconds.
#include <algorithm>
#include <cstring>

#include "text/tokenizer_impl.h"

namespace edgevl::text {
namespace {

// off has n + 1 entries starting at 0, never decreasing, ending at the byte count.
void check_offsets(std::span<const uint32_t> off, size_t n_chars, uint32_t n,
                   const std::string& what, const char* name) {
  check(off.size() == size_t(n) + 1, "{}: {} {} offsets for {} tokens (corrupted file?)", what,
        off.size(), name, n);
  check(off[0] == 0 && off[n] == n_chars,
        "{}: {} offsets span {}..{} but there are {} bytes (corrupted file?)", what, name, off[0],
        off[n], n_chars);
  bool bad = false;
  for (size_t i = 0; i < n; ++i) bad |= off[i] > off[i + 1];
  if (bad)
    for (size_t i = 0; i < n; ++i)
      check(off[i] <= off[i + 1], "{}: {} offset of token {} goes backwards (corrupted file?)",
            what, name, i);
}

std::string byte_piece_name(int b) {
  return fmt::format("<0x{:02X}>", b);
}

}  // namespace

Tokenizer::Impl::Impl(std::span<const uint8_t> bytes, const std::string& what, bool copy) {
  // Arrays are used in place, so they must be aligned in memory; the .evb writer aligns
  // sections to 64 bytes, anything else (a test buffer, a fuzz input) is copied.
  if (copy || reinterpret_cast<uintptr_t>(bytes.data()) % 8 != 0) {
    owned.resize((bytes.size() + 7) / 8);
    if (!bytes.empty()) std::memcpy(owned.data(), bytes.data(), bytes.size());
    bytes = {reinterpret_cast<const uint8_t*>(owned.data()), bytes.size()};
  }
  parse(bytes, what);
  derive(what);
}

void Tokenizer::Impl::parse(std::span<const uint8_t> bytes, const std::string& what) {
  using namespace section;
  ByteReader r(bytes, what);
  const uint32_t magic = r.get<uint32_t>();
  check(magic == kMagic, "{}: not a tokenizer section (magic {:#x})", what, magic);
  const uint32_t version = r.get<uint32_t>();
  check(version == kVersion,
        "{}: tokenizer format version {} is not supported (expected {}); recompile the model "
        "with this edgevl",
        what, version, kVersion);
  const uint32_t k = r.get<uint32_t>();
  check(k <= 1, "{}: unknown tokenizer kind {}", what, k);
  kind = TokenizerKind(k);
  flags = r.get<uint32_t>();
  check(flags < 256, "{}: unknown tokenizer flags {:#x}", what, flags);
  bos_id = r.get<int32_t>();
  eos_id = r.get<int32_t>();
  unk_id = r.get<int32_t>();
  pad_id = r.get<int32_t>();
  n = r.get<uint32_t>();
  check(n > 0 && n <= kMaxPieces, "{}: vocabulary size {} is out of range", what, n);
  for (int32_t id : {bos_id, eos_id, unk_id, pad_id})
    check(id >= -1 && id < int64_t(n),
          "{}: special token id {} is outside the vocabulary (size {})", what, id, n);

  piece_off = r.get_array<uint32_t>("piece offsets");
  piece_chars = r.get_array<uint8_t>("piece bytes");
  check_offsets(piece_off, piece_chars.size(), n, what, "piece");
  types = r.get_array<uint8_t>("token types");
  check(types.size() == n, "{}: {} token types for {} pieces", what, types.size(), n);
  bool bad_type = false;
  for (uint8_t t : types) bad_type |= !valid_type(t);
  if (bad_type)
    for (uint32_t i = 0; i < n; ++i)
      check(valid_type(types[i]), "{}: token {} has invalid type {}", what, i, types[i]);
  const uint32_t has_scores = r.get<uint32_t>();
  check(has_scores <= 1, "{}: bad score marker {}", what, has_scores);
  scores = r.get_array<float>("scores");
  check(scores.size() == (has_scores ? n : 0), "{}: {} scores for {} pieces", what, scores.size(),
        n);
  check(kind != TokenizerKind::SentencePieceBpe || has_scores,
        "{}: sentencepiece tokenizer without scores", what);
  merges = r.get_array<int32_t>("merges");
  check(merges.size() % 2 == 0, "{}: odd merge table length {}", what, merges.size());

  const uint32_t n_added = r.get<uint32_t>();
  r.need(size_t(n_added) * 9, "added tokens");
  added.reserve(n_added);
  for (uint32_t i = 0; i < n_added; ++i) {
    AddedToken t;
    t.id = r.get<int32_t>();
    const uint8_t f = r.get<uint8_t>();
    check(f < 8, "{}: added token {} has unknown flags {:#x}", what, i, f);
    t.special = f & kSpecial;
    t.lstrip = f & kLstrip;
    t.rstrip = f & kRstrip;
    t.content = r.get_string();
    check(t.id >= 0 && t.id < int64_t(n), "{}: added token '{}' has id {} outside 0..{}", what,
          t.content, t.id, n - 1);
    check(!t.content.empty(), "{}: added token {} is empty", what, t.id);
    check(piece(t.id) == t.content,
          "{}: added token {} '{}' does not match the vocabulary piece '{}'", what, t.id, t.content,
          piece(t.id));
    added.push_back(std::move(t));
  }
  pretokenizer_regex = r.get_string();

  bytes_off = r.get_array<uint32_t>("decoded-byte offsets");
  byte_chars = r.get_array<uint8_t>("decoded bytes");
  check_offsets(bytes_off, byte_chars.size(), n, what, "decoded-byte");
  piece_table.max_probe = r.get<uint32_t>();
  piece_table.slots = r.get_array<PieceSlot>("piece table");
  validate_piece_table(piece_table, n, what, "piece");
  sp_table.max_probe = r.get<uint32_t>();
  sp_table.slots = r.get_array<PieceSlot>("sentencepiece piece table");
  validate_piece_table(sp_table, n, what, "sentencepiece piece");
  merge_table.max_probe = r.get<uint32_t>();
  merge_table.slots = r.get_array<MergeSlot>("merge table");
  validate_merge_table(merge_table, n, what);
  check(r.done(), "{}: {} unexpected bytes after the tokenizer (corrupted file?)", what,
        r.remaining());
}

void Tokenizer::Impl::derive(const std::string& what) {
  special.resize(n);
  for (uint32_t i = 0; i < n; ++i) special[i] = types[i] == uint8_t(TokenType::Control);
  for (const auto& t : added) special[t.id] = t.special ? 1 : 0;

  for (uint32_t i = 0; i < added.size(); ++i)
    added_by_byte[uint8_t(added[i].content[0])].push_back(i);
  for (auto& v : added_by_byte)
    std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
      return added[a].content.size() > added[b].content.size();
    });

  byte_id.fill(-1);
  if (kind == TokenizerKind::ByteLevelBpe) {
    for (int b = 0; b < 256; ++b) {
      const std::string name = byte_to_unicode(uint8_t(b));
      byte_id[b] = find_piece(name);
      check(byte_id[b] >= 0, "{}: byte-level vocabulary has no piece for byte {:#04x} ('{}')", what,
            b, name);
    }
    if (!pretokenizer_regex.empty()) regex = std::make_unique<SplitRegex>(pretokenizer_regex);
    return;
  }
  for (uint32_t i = 0; i < n; ++i)
    if (types[i] == uint8_t(TokenType::UserDefined) && piece_off[i] != piece_off[i + 1])
      user_defined_by_byte[piece_chars[piece_off[i]]].push_back(int32_t(i));
  for (auto& v : user_defined_by_byte)
    std::stable_sort(v.begin(), v.end(),
                     [&](int32_t a, int32_t b) { return piece(a).size() > piece(b).size(); });
  if (flag(section::kByteFallback)) {
    for (int b = 0; b < 256; ++b) {
      const int32_t id = find_piece(byte_piece_name(b));
      check(id >= 0 && type(id) == TokenType::Byte,
            "{}: byte fallback is on but piece {} is missing", what, byte_piece_name(b));
      byte_id[b] = id;
    }
  }
  check(unk_id >= 0 && type(unk_id) == TokenType::Unknown,
        "{}: sentencepiece model needs an unknown piece (unk id {})", what, unk_id);
}

TokenizerData Tokenizer::to_data() const {
  using namespace section;
  const Impl& m = *impl_;
  TokenizerData d;
  d.kind = m.kind;
  d.pieces.reserve(m.n);
  for (uint32_t i = 0; i < m.n; ++i) d.pieces.emplace_back(m.piece(int32_t(i)));
  d.types.resize(m.n);
  for (uint32_t i = 0; i < m.n; ++i) d.types[i] = m.type(int32_t(i));
  d.scores.assign(m.scores.begin(), m.scores.end());
  d.merges.reserve(m.merges.size() / 2);
  for (size_t i = 0; i < m.merges.size(); i += 2)
    d.merges.emplace_back(m.merges[i], m.merges[i + 1]);
  d.added = m.added;
  d.pretokenizer_regex = m.pretokenizer_regex;
  d.bos_id = m.bos_id;
  d.eos_id = m.eos_id;
  d.unk_id = m.unk_id;
  d.pad_id = m.pad_id;
  d.add_bos = m.flag(kAddBos);
  d.add_eos = m.flag(kAddEos);
  d.ignore_merges = m.flag(kIgnoreMerges);
  d.add_dummy_prefix = m.flag(kDummyPrefix);
  d.remove_extra_whitespaces = m.flag(kRemoveExtraWs);
  d.escape_whitespaces = m.flag(kEscapeWs);
  d.byte_fallback = m.flag(kByteFallback);
  d.nfc = m.flag(kNfc);
  // The rank-ordered merge list is not used at run time, so only this copy checks it.
  validate_tokenizer(d);
  return d;
}

}  // namespace edgevl::text
