// Tokenizer behaviour that does not need reference vectors: round trips, streaming,
// serialization and its failure modes, added-token parsing, the synth vocabularies.
#include <gtest/gtest.h>

#include <cstring>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "compiler/sentencepiece_proto.h"
#include "compiler/tokenizer_import.h"
#include "core/mapped_file.h"
#include "support/test_paths.h"
#include "synth/synth_tokenizer.h"
#include "text/tokenizer.h"
#include "text/tokenizer_tables.h"
#include "text/unicode_nfc.h"

namespace fs = std::filesystem;
using edgevl::compiler::load_tokenizer_dir;
using edgevl::text::decode;
using edgevl::text::StreamDecoder;
using edgevl::text::Tokenizer;
using edgevl::text::TokenizerData;

namespace {

const std::string kMixed =
    "Hello, world!  Tabs\tand\nnewlines\r\n  indented\n\n"
    "日本語のテキスト 한국어 中文混合English 😀🚀🇨🇳 👨‍👩‍👧 "
    "naïve "
    "café "
    "— "
    "“quotes” "
    "½ "
    "ｆｕｌｌ x² ∑ 🦙.cpp   trailing   ";

bool valid_utf8(const std::string& s) {
  std::string copy = s;
  return edgevl::text::take_complete_utf8(copy, true) == s && copy.empty();
}

TokenizerData synth_bytelevel(const edgevl::test::TempDir& tmp, int32_t vocab) {
  edgevl::synth::write_bytelevel_bpe_tokenizer(tmp.path(), vocab);
  return load_tokenizer_dir(tmp.path());
}

TokenizerData synth_sp(const edgevl::test::TempDir& tmp, int32_t vocab, bool internlm2) {
  edgevl::synth::write_sentencepiece_tokenizer(tmp.path(), vocab, internlm2);
  return load_tokenizer_dir(tmp.path());
}

std::vector<uint8_t> serialize(const TokenizerData& d) {
  edgevl::ByteWriter w;
  edgevl::text::write_tokenizer(d, w);
  return w.buffer();
}

TokenizerData deserialize(const std::vector<uint8_t>& b) {
  edgevl::ByteReader r(b, "test tokenizer");
  return edgevl::text::read_tokenizer(r);
}

// Streams ids one at a time; every chunk must be valid UTF-8 and the whole equal decode().
void check_stream(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamDecoder dec(tok);
  std::string all;
  for (int32_t id : ids) {
    const std::string part = dec.push(id);
    ASSERT_TRUE(valid_utf8(part)) << "broken UTF-8 after id " << id;
    all += part;
  }
  all += dec.flush();
  EXPECT_EQ(all, decode(tok, ids));
}

}  // namespace

TEST(Tokenizer, SynthByteLevelRoundTrip) {
  edgevl::test::TempDir tmp;
  const Tokenizer tok(synth_bytelevel(tmp, 4000));
  EXPECT_EQ(tok.vocab_size(), 4000);
  EXPECT_EQ(tok.find_token("<|endoftext|>"), 3997);
  EXPECT_EQ(tok.find_token("<|im_start|>"), 3998);
  EXPECT_EQ(tok.find_token("<|im_end|>"), 3999);
  EXPECT_EQ(tok.eos_id(), 3999);
  EXPECT_FALSE(tok.add_bos());
  const std::string english = "The robot looked at the garden and started to work.";
  const auto ids = tok.encode(english);
  EXPECT_LT(ids.size(), english.size() / 3) << "English should tokenize into multi-char pieces";
  EXPECT_EQ(decode(tok, ids), english);
  const auto mixed = tok.encode(kMixed);
  EXPECT_EQ(decode(tok, mixed), kMixed);
  check_stream(tok, mixed);
}

TEST(Tokenizer, SynthByteLevelFullQwenVocab) {
  edgevl::test::TempDir tmp;
  const Tokenizer tok(synth_bytelevel(tmp, 151936));
  EXPECT_EQ(tok.vocab_size(), 151646);
  EXPECT_EQ(tok.find_token("<|endoftext|>"), 151643);
  EXPECT_EQ(tok.find_token("<|im_start|>"), 151644);
  EXPECT_EQ(tok.find_token("<|im_end|>"), 151645);
  EXPECT_TRUE(edgevl::compiler::load_chat_template_string(tmp.path()).has_value());
  const std::string s = "<|im_start|>user\nDescribe the picture.<|im_end|>\n";
  const auto ids = tok.encode(s);
  EXPECT_EQ(ids.front(), 151644);
  EXPECT_EQ(decode(tok, ids, false), s);
}

TEST(Tokenizer, SynthSentencepieceLlama) {
  edgevl::test::TempDir tmp;
  const Tokenizer tok(synth_sp(tmp, 2000, false));
  EXPECT_EQ(tok.vocab_size(), 2000);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_TRUE(tok.add_bos());
  const std::string english = "The robot looked at the garden and started to work.";
  const auto ids = tok.encode(english);
  EXPECT_LT(ids.size(), english.size() / 3);
  EXPECT_EQ(tok.piece(ids[0]).substr(0, 3), "\xE2\x96\x81");  // dummy prefix
  EXPECT_EQ(decode(tok, ids), english);
  const auto mixed = tok.encode(kMixed);
  EXPECT_EQ(decode(tok, mixed), kMixed);
  check_stream(tok, mixed);
  // "<s>" is a listed special token: parsed as BOS only when asked to.
  EXPECT_EQ(tok.encode("<s>").size(), 1u);
  EXPECT_GT(tok.encode("<s>", false).size(), 1u);
}

TEST(Tokenizer, SynthSentencepieceInternLM2Chat) {
  edgevl::test::TempDir big, small;
  const Tokenizer tok(synth_sp(big, 92544, true));
  EXPECT_EQ(tok.find_token("<|im_end|>"), 92542);
  EXPECT_EQ(tok.find_token("<|im_start|>"), 92543);
  const auto ids = tok.encode("<|im_start|>assistant\nhello<|im_end|>");
  EXPECT_EQ(ids.front(), 92543);
  EXPECT_EQ(ids.back(), 92542);
  EXPECT_EQ(decode(tok, ids, false), "<|im_start|>assistant\nhello<|im_end|>");
  EXPECT_EQ(decode(tok, ids), "assistant\nhello");
  const Tokenizer tiny(synth_sp(small, 1000, true));
  EXPECT_EQ(tiny.find_token("<|im_end|>"), 998);
  EXPECT_EQ(tiny.find_token("<|im_start|>"), 999);
  EXPECT_EQ(decode(tiny, tiny.encode(kMixed)), kMixed);
}

TEST(Tokenizer, SerializationRoundTrip) {
  edgevl::test::TempDir a, b;
  for (const TokenizerData& d : {synth_bytelevel(a, 1000), synth_sp(b, 1000, true)}) {
    const auto bytes = serialize(d);
    const TokenizerData back = deserialize(bytes);
    EXPECT_EQ(back.pieces, d.pieces);
    EXPECT_EQ(back.types, d.types);
    EXPECT_EQ(back.scores, d.scores);
    EXPECT_EQ(back.merges, d.merges);
    EXPECT_EQ(back.added.size(), d.added.size());
    EXPECT_EQ(back.bos_id, d.bos_id);
    EXPECT_EQ(back.eos_id, d.eos_id);
    EXPECT_EQ(back.add_bos, d.add_bos);
    EXPECT_EQ(back.add_dummy_prefix, d.add_dummy_prefix);
    EXPECT_EQ(back.pretokenizer_regex, d.pretokenizer_regex);
    EXPECT_EQ(back.nfc, d.nfc);
    EXPECT_EQ(serialize(back), bytes);
    EXPECT_EQ(Tokenizer(back).encode(kMixed), Tokenizer(d).encode(kMixed));
  }
}

// Every truncation and a few thousand byte flips either load or throw edgevl::Error.
TEST(Tokenizer, CorruptSerializedBytesThrow) {
  edgevl::test::TempDir a, b;
  for (const TokenizerData& d : {synth_bytelevel(a, 300), synth_sp(b, 400, false)}) {
    const auto bytes = serialize(d);
    for (size_t n = 0; n < bytes.size(); n += 1 + n / 64) {
      std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
      EXPECT_THROW(deserialize(cut), edgevl::Error) << "truncated at " << n;
    }
    uint64_t rng = 12345;
    int loaded = 0;
    for (int i = 0; i < 3000; ++i) {
      auto bad = bytes;
      for (int k = 0; k < 3; ++k) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        bad[(rng >> 20) % bad.size()] ^= uint8_t(1u << ((rng >> 8) % 8));
      }
      try {
        const Tokenizer tok(deserialize(bad));
        (void)tok.encode("some text 😀 <|im_end|>");
        ++loaded;
      } catch (const edgevl::Error&) {
      }
    }
    EXPECT_LT(loaded, 3000);
  }
}

namespace {

// Where the stored lookup tables sit in a serialized section (the layout of tokenizer_impl.h).
struct TableOffsets {
  size_t piece_offsets = 0;  // u32[n + 1]
  size_t piece_probe = 0, piece_slots = 0;
  size_t merge_probe = 0, merge_slots = 0;
};

TableOffsets locate_tables(const std::vector<uint8_t>& b) {
  edgevl::ByteReader r(b, "walk");
  auto at = [&](const auto& span) {
    return size_t(reinterpret_cast<const uint8_t*>(span.data()) - b.data());
  };
  TableOffsets t;
  for (int i = 0; i < 9; ++i) r.get<uint32_t>();  // magic .. vocabulary size
  t.piece_offsets = at(r.get_array<uint32_t>("piece offsets"));
  r.get_array<uint8_t>("piece bytes");
  r.get_array<uint8_t>("types");
  r.get<uint32_t>();
  r.get_array<float>("scores");
  r.get_array<int32_t>("merges");
  const uint32_t n_added = r.get<uint32_t>();
  for (uint32_t i = 0; i < n_added; ++i) {
    r.get<int32_t>();
    r.get<uint8_t>();
    r.get_string();
  }
  r.get_string();
  r.get_array<uint32_t>("decoded offsets");
  r.get_array<uint8_t>("decoded bytes");
  t.piece_probe = r.pos();
  r.get<uint32_t>();
  t.piece_slots = at(r.get_array<edgevl::text::PieceSlot>("piece table"));
  r.get<uint32_t>();
  r.get_array<edgevl::text::PieceSlot>("sp table");
  t.merge_probe = r.pos();
  r.get<uint32_t>();
  t.merge_slots = at(r.get_array<edgevl::text::MergeSlot>("merge table"));
  EXPECT_TRUE(r.done());
  return t;
}

// Fields of a section's bytes at any offset (the format packs them: no alignment to rely on).
template <class T>
T get_field(const std::vector<uint8_t>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}
template <class T>
void set_field(std::vector<uint8_t>& b, size_t off, const T& v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}

// Throws edgevl::Error whose message names the section and contains `want`.
void expect_rejected(const std::vector<uint8_t>& b, const std::string& want) {
  try {
    (void)Tokenizer::from_section(b, "model.evb section 'tokenizer'");
    ADD_FAILURE() << "loaded; expected an error containing '" << want << "'";
  } catch (const edgevl::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("model.evb section 'tokenizer'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  }
}

}  // namespace

// Each stored table is checked at load: an id outside the vocabulary, an impossible probe
// length, an offset going backwards or an old section version is refused with its name.
TEST(Tokenizer, CorruptTablesAreRejected) {
  edgevl::test::TempDir tmp;
  const TokenizerData d = synth_bytelevel(tmp, 1000);
  const auto good = serialize(d);
  const TableOffsets t = locate_tables(good);
  EXPECT_NO_THROW((void)Tokenizer::from_section(good, "x"));
  const int32_t n = int32_t(d.pieces.size());
  // Offset of the first occupied slot (id / left >= 0) of a table.
  auto first_used = [&](size_t base, size_t stride, size_t id_at) {
    auto b = good;
    size_t off = base;
    while (get_field<int32_t>(b, off + id_at) < 0) off += stride;
    return off;
  };
  {
    auto b = good;
    const size_t at = first_used(t.piece_slots, 8, 4);
    auto slot = get_field<edgevl::text::PieceSlot>(b, at);
    slot.id = n + 5;
    set_field(b, at, slot);
    expect_rejected(b, "piece table slot");
  }
  {
    auto b = good;
    const size_t at = first_used(t.merge_slots, 16, 0);
    auto slot = get_field<edgevl::text::MergeSlot>(b, at);
    slot.result = n;
    set_field(b, at, slot);
    expect_rejected(b, "merge table slot");
  }
  {
    auto b = good;
    const size_t at = first_used(t.merge_slots, 16, 0);
    auto slot = get_field<edgevl::text::MergeSlot>(b, at);
    slot.left = -7;
    set_field(b, at, slot);
    expect_rejected(b, "outside the vocabulary");
  }
  {
    auto b = good;
    set_field<uint32_t>(b, t.merge_probe, 100000);
    expect_rejected(b, "probe length");
  }
  {
    auto b = good;
    set_field<uint32_t>(b, t.piece_probe, 1u << 30);
    expect_rejected(b, "probe length");
  }
  {
    auto b = good;
    set_field<uint32_t>(b, t.piece_offsets + 4 * 5, 1u << 20);
    expect_rejected(b, "goes backwards");
  }
  {
    auto b = good;
    set_field<uint32_t>(b, 4, 1);  // a version 1 section, from before the stored tables
    expect_rejected(b, "tokenizer format version 1 is not supported");
  }
  {
    auto b = good;
    b.push_back(0);
    expect_rejected(b, "unexpected bytes");
  }
}

// The section is used in place when aligned and copied when not; both encode the same, and
// the same as the tokenizer built from the data.
TEST(Tokenizer, SectionInPlaceAndCopied) {
  edgevl::test::TempDir a, b;
  for (const TokenizerData& d : {synth_bytelevel(a, 2000), synth_sp(b, 1000, true)}) {
    const auto bytes = serialize(d);
    std::vector<uint8_t> shifted(bytes.size() + 1);
    std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
    const Tokenizer in_place = Tokenizer::from_section(bytes, "aligned");
    const Tokenizer copied = Tokenizer::from_section(std::span(shifted).subspan(1), "misaligned");
    const auto want = Tokenizer(d).encode(kMixed);
    EXPECT_EQ(in_place.encode(kMixed), want);
    EXPECT_EQ(copied.encode(kMixed), want);
    EXPECT_EQ(decode(in_place, want), kMixed);
  }
}

TEST(Tokenizer, CorruptSentencepieceModelThrows) {
  edgevl::test::TempDir a;
  edgevl::synth::write_sentencepiece_tokenizer(a.path(), 400, false);
  edgevl::MappedFile f(a.path() / "tokenizer.model");
  const std::vector<uint8_t> bytes(f.bytes().begin(), f.bytes().end());
  auto load = [](std::span<const uint8_t> b) {
    const auto m = edgevl::compiler::parse_sentencepiece_model(b, "test.model");
    return Tokenizer(edgevl::compiler::tokenizer_from_sentencepiece(m, "test.model"));
  };
  EXPECT_NO_THROW(load(bytes));
  for (size_t n = 1; n < bytes.size(); n += 7) {
    try {
      load(std::span(bytes.data(), n));
    } catch (const edgevl::Error&) {
    }
  }
  uint64_t rng = 99;
  for (int i = 0; i < 3000; ++i) {
    auto bad = bytes;
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    bad[(rng >> 20) % bad.size()] = uint8_t(rng >> 48);
    try {
      (void)load(bad).encode("text");
    } catch (const edgevl::Error&) {
    }
  }
  std::vector<uint8_t> unigram = bytes;
  auto m = edgevl::compiler::parse_sentencepiece_model(bytes, "x");
  m.model_type = 1;
  EXPECT_THROW(edgevl::compiler::tokenizer_from_sentencepiece(m, "x"), edgevl::Error);
  m.model_type = 2;
  m.precompiled_charsmap = "xx";
  m.normalizer_name = "nmt_nfkc";
  EXPECT_THROW(edgevl::compiler::tokenizer_from_sentencepiece(m, "x"), edgevl::Error);
}

TEST(Tokenizer, SpecialTokenParsingAndStrip) {
  edgevl::test::TempDir tmp;
  TokenizerData d = synth_bytelevel(tmp, 1000);
  {
    const Tokenizer tok(d);
    const int32_t end = *tok.find_token("<|im_end|>");
    auto want = tok.encode("hi");
    want.push_back(end);
    EXPECT_EQ(tok.encode("hi<|im_end|>"), want);
    const auto raw = tok.encode("hi<|im_end|>", false);
    EXPECT_EQ(std::count(raw.begin(), raw.end(), end), 0);
    EXPECT_EQ(decode(tok, raw), "hi<|im_end|>");
    EXPECT_TRUE(tok.is_special(end));
    EXPECT_EQ(tok.token_bytes(end), "<|im_end|>");
    EXPECT_FALSE(tok.is_special(tok.encode("hi")[0]));
  }
  for (auto& t : d.added) t.lstrip = t.rstrip = true;
  const Tokenizer tok(d);
  const int32_t end = *tok.find_token("<|im_end|>");
  EXPECT_EQ(tok.encode("a  <|im_end|> \n b"),
            (std::vector<int32_t>{*tok.find_token("a"), end, *tok.find_token("b")}));
}

TEST(Tokenizer, StreamingHoldsBackPartialCharacters) {
  edgevl::test::TempDir tmp;
  const Tokenizer tok(synth_sp(tmp, 400, false));
  // Byte fallback spells "€" (E2 82 AC) as three byte tokens: nothing until the last.
  const auto ids = tok.encode("€");
  StreamDecoder dec(tok);
  std::vector<std::string> parts;
  for (int32_t id : ids) parts.push_back(dec.push(id));
  ASSERT_GE(parts.size(), 3u);
  EXPECT_EQ(parts[parts.size() - 2], "");
  EXPECT_EQ(parts.back(), "€");
  EXPECT_EQ(dec.flush(), "");
  // An unfinished sequence at the end is replaced on flush.
  const int32_t e2 = *tok.find_token("<0xE2>");
  const int32_t x82 = *tok.find_token("<0x82>");
  StreamDecoder d2(tok);
  EXPECT_EQ(d2.push(e2), "");
  EXPECT_EQ(d2.push(x82), "");
  EXPECT_EQ(d2.flush(), "\xEF\xBF\xBD");
  // An invalid byte in the middle is replaced at once.
  const int32_t ff = *tok.find_token("<0xFF>");
  const int32_t a = *tok.find_token("<0x41>");
  EXPECT_EQ(decode(tok, std::vector<int32_t>{ff, a}),
            "\xEF\xBF\xBD"
            "A");
}

TEST(Tokenizer, Utf8Splitter) {
  std::string s = "ab\xF0\x9F\x98";
  EXPECT_EQ(edgevl::text::take_complete_utf8(s, false), "ab");
  EXPECT_EQ(s, "\xF0\x9F\x98");
  s += "\x80";
  EXPECT_EQ(edgevl::text::take_complete_utf8(s, false), "😀");
  s = "\xC3(\xE2\x82";
  EXPECT_EQ(edgevl::text::take_complete_utf8(s, false), "\xEF\xBF\xBD(");
  EXPECT_EQ(edgevl::text::take_complete_utf8(s, true), "\xEF\xBF\xBD");
}

TEST(Tokenizer, ConcurrentEncodeIsConsistent) {
  edgevl::test::TempDir tmp;
  const Tokenizer tok(synth_bytelevel(tmp, 2000));
  const auto want = tok.encode(kMixed);
  std::vector<std::thread> th;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&] {
      for (int i = 0; i < 50; ++i)
        if (tok.encode(kMixed) != want) ++bad;
    });
  for (auto& t : th) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(Tokenizer, MissingFilesAreNamed) {
  edgevl::test::TempDir tmp;
  try {
    load_tokenizer_dir(tmp.path());
    FAIL();
  } catch (const edgevl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.model"), std::string::npos);
  }
  std::ofstream(tmp.path() / "vocab.json") << "{}";
  try {
    load_tokenizer_dir(tmp.path());
    FAIL();
  } catch (const edgevl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("merges.txt"), std::string::npos);
  }
}

// Encode speed on a long English text with the real Qwen2 vocabulary (synth when absent).
TEST(Tokenizer, EncodeSpeed) {
  edgevl::test::TempDir tmp;
  const fs::path real = edgevl::test::shared_data("qwen2-tokenizer");
  const Tokenizer tok(real.empty() ? synth_bytelevel(tmp, 151936) : load_tokenizer_dir(real));
  std::string text;
  const std::string para =
      "It was a bright cold day in April, and the clocks were striking thirteen. Engineers "
      "measured the throughput of their tokenizer on long documents, because a slow "
      "tokenizer delays the first token of every answer. ";
  while (text.size() < 1000000) text += para + std::to_string(text.size()) + "\n";
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = tok.encode(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("encode: %zu bytes -> %zu tokens in %.3f s = %.0f tokens/s (%s vocab)\n", text.size(),
              ids.size(), s, ids.size() / s, real.empty() ? "synth" : "real Qwen2");
  EXPECT_EQ(decode(tok, ids), text);
}

// Expected forms from Python's unicodedata.normalize("NFC", ...).
TEST(Tokenizer, NfcNormalization) {
  using edgevl::text::nfc_normalize;
  EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc_normalize("Cafe\u0301"), "Caf\u00e9");
  EXPECT_EQ(nfc_normalize("\u212b"), "\u00c5");              // singleton decomposition
  EXPECT_EQ(nfc_normalize("\u1100\u1161\u11a8"), "\uac01");  // Hangul LVT
  EXPECT_EQ(nfc_normalize("\u1e0b\u0323"), "\u1e0d\u0307");  // reorder, then compose
  EXPECT_EQ(nfc_normalize("q\u0307\u0323"), "q\u0323\u0307");
  EXPECT_EQ(nfc_normalize("\u0958"), "\u0915\u093c");  // composition exclusion
  EXPECT_EQ(nfc_normalize("a\u0301\u0301"), "\u00e1\u0301");
  EXPECT_EQ(nfc_normalize("\xff\xfe"), "\xff\xfe");  // invalid UTF-8 untouched
}

// The same vocabulary through tokenizer.json (both merge spellings) encodes identically.
TEST(Tokenizer, TokenizerJsonImportMatchesVocabMerges) {
  edgevl::test::TempDir a, b;
  const Tokenizer ref(synth_bytelevel(a, 3000));
  using nlohmann::json;
  const json vocab = json::parse(edgevl::read_text_file(a.path() / "vocab.json"));
  const std::string mt = edgevl::read_text_file(a.path() / "merges.txt");
  json merges = json::array();
  std::istringstream ms(mt);
  for (std::string line; std::getline(ms, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.find(' ');
    if (merges.size() % 2)
      merges.push_back(line);
    else
      merges.push_back({line.substr(0, sp), line.substr(sp + 1)});
  }
  json added = json::array();
  for (const auto& t : ref.to_data().added)
    added.push_back({{"id", t.id},
                     {"content", t.content},
                     {"special", t.special},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false}});
  const json tj = {
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", edgevl::compiler::kQwen2SplitPattern}}},
           {"behavior", "Isolated"}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  std::ofstream(b.path() / "tokenizer.json") << tj.dump();
  const Tokenizer tok(load_tokenizer_dir(b.path()));
  EXPECT_TRUE(tok.to_data().nfc);
  EXPECT_EQ(tok.vocab_size(), ref.vocab_size());
  EXPECT_EQ(tok.encode(kMixed), ref.encode(kMixed));
  EXPECT_EQ(tok.encode("<|im_start|>x"), ref.encode("<|im_start|>x"));
}
