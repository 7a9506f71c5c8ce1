// Encodings checked against the reference implementations (HF tokenizers via llama.cpp's
// vectors for Qwen2, libsentencepiece for InternLM2 and stories260K).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "compiler/tokenizer_import.h"
#include "core/mapped_file.h"
#include "support/test_paths.h"
#include "text/tokenizer.h"

namespace fs = std::filesystem;
using edgevl::compiler::load_tokenizer_dir;
using edgevl::text::Tokenizer;
using edgevl::text::TokenizerData;

namespace {

std::string ids_str(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) s += std::to_string(x) + " ";
  return s;
}

// Runs every {"text", "ids"} line of a JSONL file; returns (passed, total).
std::pair<int, int> run_jsonl(const Tokenizer& tok, const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  int pass = 0, total = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    const std::string text = j["text"];
    const auto want = j["ids"].get<std::vector<int32_t>>();
    const auto got = tok.encode(text);
    ++total;
    if (got == want) {
      ++pass;
    } else {
      ADD_FAILURE() << "text '" << text << "'\n want " << ids_str(want) << "\n got  "
                    << ids_str(got);
    }
    // Everything these vocabularies can spell decodes back to the input.
    EXPECT_EQ(edgevl::text::decode(tok, got), text);
  }
  return {pass, total};
}

// The tables the compiler stores, read in place, against lookups built the way the runtime
// used to build them at load (a hash map of strings, each merge re-spelled): every piece, every
// merge rule, and spellings and pairs that must be absent.
void expect_tables_match_slow_path(const TokenizerData& d) {
  edgevl::ByteWriter w;
  edgevl::text::write_tokenizer(d, w);
  const std::vector<uint8_t>& bytes = w.buffer();  // operator new: 16-byte aligned
  const Tokenizer tok = Tokenizer::from_section(bytes, "real vocabulary");
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)Tokenizer::from_section(bytes, "real vocabulary");
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%zu pieces, %zu merges: section %.2f MB, read in place in %.2f ms (median of 5)\n",
              d.pieces.size(), d.merges.size(), bytes.size() / 1e6, ms[2]);

  std::unordered_map<std::string, int32_t> ref;
  for (size_t i = 0; i < d.pieces.size(); ++i)
    if (!d.pieces[i].empty()) ref.emplace(d.pieces[i], int32_t(i));
  for (const auto& t : d.added) ref[t.content] = t.id;
  size_t bad = 0, absent_checked = 0;
  for (const auto& [s, id] : ref) bad += tok.find_token(s) != id;
  for (const auto& p : d.pieces) {
    for (const std::string& miss : {p + "\x01", "\x02" + p}) {
      if (ref.count(miss)) continue;
      bad += tok.find_token(miss).has_value();
      ++absent_checked;
    }
  }
  EXPECT_EQ(bad, 0u) << "piece lookups differ";
  EXPECT_EQ(absent_checked, 2 * d.pieces.size());

  // Byte-level merges: the first rule for a pair applies; its result is the joined spelling.
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> rules;
  for (size_t r = 0; r < d.merges.size(); ++r) {
    const auto [a, b] = d.merges[r];
    rules.emplace((uint64_t(uint32_t(a)) << 32) | uint32_t(b),
                  std::pair(int32_t(r), ref.at(d.pieces[a] + d.pieces[b])));
  }
  bad = 0;
  size_t absent = 0;
  for (const auto& [a, b] : d.merges) {
    bad += tok.merge_rule(a, b) != rules.at((uint64_t(uint32_t(a)) << 32) | uint32_t(b));
    if (!rules.count((uint64_t(uint32_t(b)) << 32) | uint32_t(a))) {
      bad += tok.merge_rule(b, a).has_value();
      ++absent;
    }
  }
  EXPECT_EQ(bad, 0u) << "merge lookups differ";
  if (!d.merges.empty()) {
    EXPECT_GT(absent, d.merges.size() / 2);
  }

  const TokenizerData back = tok.to_data();
  EXPECT_EQ(back.pieces, d.pieces);
  EXPECT_EQ(back.types, d.types);
  EXPECT_EQ(back.scores, d.scores);
  EXPECT_EQ(back.merges, d.merges);
  EXPECT_EQ(back.added.size(), d.added.size());
  std::vector<bool> special(d.pieces.size());
  for (size_t i = 0; i < d.pieces.size(); ++i)
    special[i] = d.types[i] == edgevl::text::TokenType::Control;
  for (const auto& t : d.added) special[t.id] = t.special;
  bad = 0;
  for (size_t i = 0; i < d.pieces.size(); ++i) bad += tok.is_special(int32_t(i)) != special[i];
  EXPECT_EQ(bad, 0u) << "special flags differ";
}

}  // namespace

TEST(TokenizerVectors, Qwen2LlamaCppVectors) {
  const fs::path dir = edgevl::test::shared_data("qwen2-tokenizer");
  if (dir.empty()) GTEST_SKIP() << edgevl::test::shared_data_missing("qwen2-tokenizer");
  const Tokenizer tok(load_tokenizer_dir(dir));
  EXPECT_EQ(tok.vocab_size(), 151646);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.eos_id(), 151643);
  EXPECT_EQ(tok.find_token("<|im_start|>"), 151644);

  std::string inp = edgevl::read_text_file(dir / "llamacpp-vectors.inp");
  std::string out = edgevl::read_text_file(dir / "llamacpp-vectors.out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0;;) {
    const size_t e = inp.find(sep, pos);
    if (e == std::string::npos) break;
    inputs.push_back(inp.substr(pos, e - pos));
    pos = e + sep.size();
  }
  std::vector<std::vector<int32_t>> expected;
  std::istringstream os(out);
  for (std::string line; std::getline(os, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t x; ls >> x;) ids.push_back(x);
    expected.push_back(ids);
  }
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(expected.size(), inputs.size());
  int pass = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto got = tok.encode(inputs[i]);
    if (got == expected[i])
      ++pass;
    else
      ADD_FAILURE() << "vector " << i << " '" << inputs[i] << "'\n want " << ids_str(expected[i])
                    << "\n got  " << ids_str(got);
    EXPECT_EQ(edgevl::text::decode(tok, got), inputs[i]);
  }
  std::printf("qwen2: %d/%zu vectors pass\n", pass, inputs.size());
  // Qwen2 NFC-normalizes: a decomposed accent encodes like the precomposed one.
  EXPECT_EQ(tok.encode("Cafe\u0301 nai\u0308ve"), tok.encode("Caf\u00e9 na\u00efve"));
}

TEST(TokenizerVectors, InternLM2Sentencepiece) {
  const fs::path dir = edgevl::test::shared_data("internlm2-tokenizer");
  if (dir.empty()) GTEST_SKIP() << edgevl::test::shared_data_missing("internlm2-tokenizer");
  const Tokenizer tok(load_tokenizer_dir(dir));
  EXPECT_EQ(tok.vocab_size(), 92544);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  const auto [pass, total] = run_jsonl(tok, dir / "vectors.jsonl");
  std::printf("internlm2: %d/%d vectors pass\n", pass, total);
  EXPECT_EQ(total, 28);
}

TEST(TokenizerVectors, Stories260kSentencepiece) {
  const fs::path dir = edgevl::test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << edgevl::test::shared_data_missing("stories260k");
  const Tokenizer tok(load_tokenizer_dir(dir));
  EXPECT_EQ(tok.vocab_size(), 512);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.bos_id(), 1);
  const auto [pass, total] = run_jsonl(tok, dir / "tokenizer_vectors.jsonl");
  std::printf("stories260k: %d/%d vectors pass\n", pass, total);
  EXPECT_EQ(total, 28);
}

// The chat models map the [UNUSED_TOKEN_*] placeholders to ChatML specials through
// tokenizer_config.json; the real sentencepiece model is reused through a symlink.
TEST(TokenizerVectors, InternLM2ChatSpecials) {
  const fs::path dir = edgevl::test::shared_data("internlm2-tokenizer");
  if (dir.empty()) GTEST_SKIP() << edgevl::test::shared_data_missing("internlm2-tokenizer");
  edgevl::test::TempDir tmp;
  fs::create_symlink(fs::absolute(dir / "tokenizer.model"), tmp.path() / "tokenizer.model");
  std::ofstream(tmp.path() / "tokenizer_config.json") << R"({
    "added_tokens_decoder": {
      "0": {"content": "<unk>", "special": true},
      "1": {"content": "<s>", "special": true},
      "2": {"content": "</s>", "special": true},
      "92542": {"content": "<|im_end|>", "special": true},
      "92543": {"content": "<|im_start|>", "special": true}
    },
    "bos_token": "<s>", "eos_token": "</s>", "add_bos_token": true,
    "chat_template": "{{ '<|im_start|>' }}"})";
  const Tokenizer tok(load_tokenizer_dir(tmp.path()));
  EXPECT_EQ(tok.find_token("<|im_end|>"), 92542);
  EXPECT_EQ(tok.find_token("<|im_start|>"), 92543);
  EXPECT_TRUE(tok.is_special(92542));
  const auto ids = tok.encode("<|im_start|>user\nHello world<|im_end|>");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 92543);
  EXPECT_EQ(ids.back(), 92542);
  EXPECT_EQ(std::vector<int32_t>(ids.end() - 3, ids.end() - 1), (std::vector<int32_t>{9843, 2028}));
  EXPECT_EQ(edgevl::text::decode(tok, ids, false), "<|im_start|>user\nHello world<|im_end|>");
  EXPECT_EQ(edgevl::text::decode(tok, ids, true), "user\nHello world");
  const auto plain = tok.encode("<|im_end|>", false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(edgevl::compiler::load_chat_template_string(tmp.path()), "{{ '<|im_start|>' }}");
  // <unk> keeps its role for encoding, and being a listed special token, decodes as HF does.
  EXPECT_EQ(tok.token_type(0), edgevl::text::TokenType::Unknown);
  EXPECT_EQ(tok.token_bytes(0), "<unk>");
  EXPECT_TRUE(tok.is_special(0));
}

TEST(TokenizerVectors, StoredTablesMatchSlowPath) {
  int checked = 0;
  for (const char* name : {"qwen2-tokenizer", "internlm2-tokenizer", "stories260k"}) {
    const fs::path dir = edgevl::test::shared_data(name);
    if (dir.empty()) continue;
    SCOPED_TRACE(name);
    expect_tables_match_slow_path(load_tokenizer_dir(dir));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << edgevl::test::shared_data_missing("qwen2-tokenizer");
}

// Qwen3.5's tokenizer (tokenizer_class Qwen3_5Tokenizer, here over the real Qwen2 vocabulary
// from vocab.json + merges.txt) keeps combining marks with their letters: Arabic with harakat
// splits differently from Qwen2's rule. Expected ids from HF tokenizers (0.23.3) with Qwen3.5's
// split pattern, NFC and byte-level BPE on the same files.
TEST(TokenizerVectors, Qwen35KeepsCombiningMarksWithLetters) {
  const fs::path src = edgevl::test::shared_data("qwen2-tokenizer");
  if (src.empty()) GTEST_SKIP() << edgevl::test::shared_data_missing("qwen2-tokenizer");
  const fs::path dir = fs::path(testing::TempDir()) / "qwen35_tokenizer";
  fs::create_directories(dir);
  for (const char* f : {"vocab.json", "merges.txt"}) {
    std::error_code ec;
    fs::remove(dir / f, ec);
    fs::create_symlink(src / f, dir / f);
  }
  std::ofstream(dir / "tokenizer_config.json") << R"({"tokenizer_class": "Qwen3_5Tokenizer"})";
  const Tokenizer tok(load_tokenizer_dir(dir));
  const std::string text = "مَرْحَبًا بِكُمْ في  naïve café, अनुच्छेद";
  const std::vector<int32_t> want = {130531, 11071, 59397, 132078, 21360, 127837, 27846, 52704,
                                     138632, 77273, 220,   94880,  586,   51950,  11,    14925,
                                     227,    60096, 72653, 146113, 30484, 249,    54784, 99};
  EXPECT_EQ(ids_str(tok.encode(text)), ids_str(want));
  EXPECT_EQ(edgevl::text::decode(tok, tok.encode(text)), text);
}
