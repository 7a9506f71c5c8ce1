// sentencepiece BPE: identity normalization plus its whitespace rules, then repeatedly merge
// the adjacent pair whose concatenation is the highest-scoring piece (leftmost on ties).
// Pieces nobody knows fall back to <0xAB> byte pieces. Mirrors sentencepiece's bpe_model.cc
// behaviour, including the re-splitting of merges that land on "unused" pieces.
#include <queue>
#include <unordered_map>

#include "text/tokenizer_impl.h"

namespace edgevl::text {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581

}  // namespace

void Tokenizer::Impl::encode_sentencepiece(std::string_view text, bool at_start,
                                           std::vector<int32_t>& out) const {
  // --- normalize ---
  std::string norm;
  norm.reserve(text.size() + text.size() / 2 + 3);
  size_t i = 0;
  const bool remove_extra_whitespaces = flag(section::kRemoveExtraWs);
  if (remove_extra_whitespaces)
    while (i < text.size() && text[i] == ' ') ++i;
  if (i == text.size()) return;
  const std::string_view space = flag(section::kEscapeWs) ? kSpaceSymbol : std::string_view(" ");
  // The dummy prefix belongs to the start of the whole input only (a segment after an added
  // token continues the text; llama.cpp and HF "first" prepend scheme agree).
  if (flag(section::kDummyPrefix) && at_start) norm.append(space);
  bool prev_space = false;
  while (i < text.size()) {
    const size_t n = utf8_valid_len(text, i);
    if (n == 0) {  // invalid UTF-8 becomes U+FFFD, one per bad byte
      norm.append(kReplacement);
      prev_space = false;
      ++i;
      continue;
    }
    if (n == 1 && text[i] == ' ') {
      if (!(remove_extra_whitespaces && prev_space)) norm.append(space);
      prev_space = true;
    } else {
      norm.append(text.substr(i, n));
      prev_space = false;
    }
    i += n;
  }
  if (remove_extra_whitespaces && prev_space)
    norm.erase(norm.end() - std::ptrdiff_t(space.size()), norm.end());

  // --- initial symbols: characters, or user-defined pieces matched whole ---
  struct Sym {
    uint32_t begin, len;
    int32_t prev, next;
    bool freeze;
  };
  std::vector<Sym> sym;
  sym.reserve(norm.size());
  const std::string_view s = norm;
  for (size_t p = 0; p < s.size();) {
    size_t len = 0;
    bool freeze = false;
    for (int32_t id : user_defined_by_byte[uint8_t(s[p])]) {
      const std::string_view u = piece(id);
      if (s.compare(p, u.size(), u) == 0) {
        len = u.size();
        freeze = true;
        break;
      }
    }
    if (!len) len = std::max<size_t>(1, utf8_valid_len(s, p));
    const int32_t idx = int32_t(sym.size());
    sym.push_back({uint32_t(p), uint32_t(len), idx - 1, p + len < s.size() ? idx + 1 : -1, freeze});
    p += len;
  }

  struct Cand {
    float score;
    int32_t left, right;
    uint32_t size;
  };
  auto worse = [](const Cand& a, const Cand& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> heap(worse);
  // Merged "unused" pieces are split back into their halves at the end.
  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> rev_merge;
  auto piece_of = [&](const Sym& x) { return s.substr(x.begin, x.len); };
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0 || sym[l].freeze || sym[r].freeze) return;
    const std::string_view merged = s.substr(sym[l].begin, sym[l].len + sym[r].len);
    const int32_t id = find_sp_piece(merged);
    if (id < 0) return;
    heap.push({scores[id], l, r, uint32_t(merged.size())});
    if (type(id) == TokenType::Unused) rev_merge[merged] = {piece_of(sym[l]), piece_of(sym[r])};
  };
  for (size_t k = 1; k < sym.size(); ++k) consider(int32_t(k - 1), int32_t(k));
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Sym& l = sym[c.left];
    Sym& r = sym[c.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.size) continue;
    l.len += r.len;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    r.len = 0;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  // --- ids, with byte fallback for unknown pieces ---
  auto emit = [&](std::string_view w, auto& self) -> void {
    int32_t id = find_piece(w);
    if (id < 0) id = unk_id;
    if (id != unk_id && type(id) == TokenType::Unused) {
      auto rv = rev_merge.find(w);
      if (rv != rev_merge.end()) {
        self(rv->second.first, self);
        self(rv->second.second, self);
        return;
      }
    }
    if (id == unk_id && flag(section::kByteFallback)) {
      for (char c : w) out.push_back(byte_id[uint8_t(c)]);
      return;
    }
    out.push_back(id);
  };
  if (sym.empty()) return;
  for (int32_t k = 0; k >= 0; k = sym[k].next) emit(piece_of(sym[k]), emit);
}

}  // namespace edgevl::text
