// The `edgevl` binary as a user drives it: the issue's end-to-end commands, and bad input
// that must end in one clear line on stderr and a non-zero exit, never a crash.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <regex>

#include "core/mapped_file.h"
#include "core/npy.h"
#include "format/evb.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"
#include "support/test_util.h"

namespace edgevl {
namespace {

using test::run_cli;
using test::TempDir;

std::string q(const std::filesystem::path& p) {
  return test::shell_quote(p);
}

// Exit status 1 and stderr ending in a single "edgevl: error: ..." line (progress lines may
// precede it) that contains every expected fragment.
void expect_clean_error(const test::CliResult& r, const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  ASSERT_FALSE(r.err.empty());
  ASSERT_EQ(r.err.back(), '\n') << r.err;
  const size_t start = r.err.find_last_of('\n', r.err.size() - 2);
  const std::string last = r.err.substr(start == std::string::npos ? 0 : start + 1);
  EXPECT_EQ(last.rfind("edgevl: error: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find("edgevl: error: "), r.err.size() - last.size()) << r.err;
  for (const auto& f : fragments)
    EXPECT_NE(last.find(f), std::string::npos) << f << " in: " << last;
}

std::filesystem::path golden_dir(const std::string& m) {
  return test::fixtures_dir() / "golden" / m;
}

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  const std::string s = read_text_file(p);
  return {s.begin(), s.end()};
}
void write_bytes(const std::filesystem::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), long(b.size()));
}

TEST(Cli, SynthCompileRunJson) {
  TempDir t;
  auto r = run_cli("synth --arch qwen2-0.5b --layers 2 --out " + q(t.path() / "q"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli("compile " + q(t.path() / "q") + " -o " + q(t.path() / "q.evb") + " --quant f32 -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli("run -m " + q(t.path() / "q.evb") + " --raw -p hello -n 16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"load_ms", "prompt_tokens", "prefill_tok_s", "decode_tok_s",
                          "peak_rss_mb", "text", "tokens"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_GE(j["prompt_tokens"].get<int>(), 1);
  EXPECT_LE(j["tokens"].size(), 16u);
  EXPECT_GT(j["peak_rss_mb"].get<double>(), 0);
}

TEST(Cli, Stories260kGreedyMatchesLlama2c) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  TempDir t;
  auto r = run_cli("compile " + q(dir) + " -o " + q(t.path() / "s.evb") + " --quant f32 -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli("run -m " + q(t.path() / "s.evb") + " --raw -p '' -n 200 --temp 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto got = nlohmann::json::parse(r.out);
  const auto want = nlohmann::json::parse(read_text_file(dir / "golden_greedy.json"));
  EXPECT_EQ(got["tokens"], want["greedy_ids"]);
  EXPECT_EQ(got["text"], want["text"]);
}

TEST(Cli, TokenizeJsonFromBinaryAndDirectory) {
  const auto dir = golden_dir("llama");
  const auto evb = test::compiled_path(dir, "f32");
  auto a = run_cli("tokenize -m " + q(evb) + " --json 'Hello world'");
  auto b = run_cli("tokenize --tokenizer " + q(dir) + " --json 'Hello world'");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  const auto j = nlohmann::json::parse(a.out);
  ASSERT_GE(j["ids"].size(), 2u);
  EXPECT_EQ(j["ids"][0], 1);  // llama adds BOS
  EXPECT_EQ(j["ids"].size(), j["pieces"].size());
  auto c = run_cli("tokenize -m " + q(evb) + " --json --no-bos 'Hello world'");
  EXPECT_EQ(nlohmann::json::parse(c.out)["ids"].size(), j["ids"].size() - 1);
}

// --json-schema / --json-object through the chat template (whose stop strings are dropped under
// a constraint) and the refusals, end to end.
TEST(Cli, RunJsonSchemaAndJsonObject) {
  TempDir t;
  const auto evb = test::compiled_path(golden_dir("qwen2"), "f32");
  const auto schema = t.path() / "s.json";
  {
    std::ofstream f(schema);
    f << R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},)"
         R"("n":{"type":"integer"}},"required":["name","n"]})";
  }
  for (const std::string seed : {"1", "2", "3"}) {
    auto r = run_cli("run -m " + q(evb) + " -p 'JSON please' -n 40 --temp 1 --seed " + seed +
                     " --json --json-schema " + q(schema));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const auto doc = nlohmann::json::parse(j["text"].get<std::string>());
    ASSERT_TRUE(doc["name"].is_string()) << j["text"];
    EXPECT_LE(doc["name"].get<std::string>().size(), 6u * 4);
    EXPECT_TRUE(doc["n"].is_number_integer()) << j["text"];
    EXPECT_EQ(doc.size(), 2u);
    EXPECT_GT(j["constraint_dfa_states"].get<int>(), 0);
  }
  auto r = run_cli("run -m " + q(evb) + " --raw -p x -n 30 --temp 1 --seed 5 --json --json-object");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(
      nlohmann::json::parse(nlohmann::json::parse(r.out)["text"].get<std::string>()).is_object());
  r = run_cli("run -m " + q(evb) + " --raw -p x -n 3 --json-schema " + q(schema));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("too small"), std::string::npos) << r.err;
  {
    std::ofstream f(schema);
    f << R"({"type":"object","properties":{"d":{"type":"string","format":"date"}}})";
  }
  r = run_cli("run -m " + q(evb) + " --raw -p x --json-schema " + q(schema));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unsupported keyword 'format' at #/properties/d"), std::string::npos)
      << r.err;
  r = run_cli("run -m " + q(evb) + " --raw -p x --json-object --beams 2");
  EXPECT_NE(r.err.find("--beams cannot be combined"), std::string::npos) << r.err;
}

// --grammar (GBNF) end to end: sampled answers in the grammar's language, and the refusals.
TEST(Cli, RunGrammar) {
  TempDir t;
  const auto evb = test::compiled_path(golden_dir("qwen2"), "f32");
  const auto grammar = t.path() / "g.gbnf";
  {
    std::ofstream f(grammar);
    f << "# an answer and a reason\nroot ::= (\"yes\" | \"no\") \", \" word \".\"\n"
         "word ::= [a-z]{1,8}\n";
  }
  const std::regex answer("(yes|no), [a-z]{1,8}\\.");
  for (const std::string seed : {"1", "2", "3"}) {
    auto r = run_cli("run -m " + q(evb) + " --raw -p x -n 20 --temp 1 --seed " + seed +
                     " --json --grammar " + q(grammar));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(std::regex_match(j["text"].get<std::string>(), answer)) << j["text"];
    EXPECT_GT(j["constraint_dfa_states"].get<int>(), 0);
  }
  auto r = run_cli("run -m " + q(evb) + " --raw -p x --grammar " + q(grammar) + " --json-object");
  expect_clean_error(r, {"--json-schema, --json-object and --grammar are alternatives"});
  r = run_cli("run -m " + q(evb) + " --raw -p x --grammar " + q(grammar) + " --lookup 2");
  expect_clean_error(r, {"--grammar cannot be combined with speculative decoding"});
  r = run_cli("run -m " + q(evb) + " --raw -p x --grammar " + q(grammar) + " --beams 2");
  expect_clean_error(r, {"--beams cannot be combined", "--grammar"});
  {
    std::ofstream f(grammar);
    f << "root ::= answer\nanswer ::= \"yes\" | reason\n";
  }
  r = run_cli("run -m " + q(evb) + " --raw -p x --grammar " + q(grammar));
  expect_clean_error(r, {"g.gbnf: grammar: line 2, column 20: undefined rule 'reason'"});
}

TEST(Cli, InspectShowsGraphsTensorsAndSizes) {
  const auto evb = test::compiled_path(golden_dir("qwen2"), "f16");
  auto r = run_cli("inspect " + q(evb));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string version = "format      v" + std::to_string(kEvbFormatVersion);
  for (const std::string& s :
       {version, std::string("graph prefill"), std::string("graph decode"),
        std::string("graph head"), std::string("layer.0.attn_out"),
        std::string("model.layers.0.self_attn.q_proj.weight"), std::string("KV cache"),
        std::string("arena"), std::string("f16"), std::string("chatml")})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

TEST(Cli, InspectShowsQ8KvCacheAndItsSaving) {
  const auto evb = test::compiled_path(golden_dir("qwen2"), "f16", "q8");
  auto r = run_cli("inspect " + q(evb));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"KV cache q8", "f32 scale per token and head", "f16 would take"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  auto bad = run_cli("compile " + q(golden_dir("qwen2")) + " -o /dev/null --kv q4");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("choose f32, f16, q8 or auto"), std::string::npos) << bad.err;
}

TEST(Cli, DumpWritesNamedTensorsAsNpy) {
  TempDir t;
  const auto evb = test::compiled_path(golden_dir("qwen2"), "f32");
  auto r = run_cli("run -m " + q(evb) +
                   " --raw -p 'hello world' -n 3 --temp 0 --ignore-eos --json --dump " +
                   q(t.path() / "d") + " --dump-filter 'layer.1.attn_out'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(t.path() / "d"))
    files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  // One prefill execution and two decode executions (the last token is not fed back).
  ASSERT_EQ(files.size(), 3u);
  EXPECT_NE(files[0].find("-prefill-layer.1.attn_out.npy"), std::string::npos) << files[0];
  EXPECT_NE(files[1].find("-decode-layer.1.attn_out.npy"), std::string::npos) << files[1];
  const NpyArray a = read_npy(t.path() / "d" / files[0]);
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(a.shape.size(), 2u);
  EXPECT_EQ(a.shape[0], j["prompt_tokens"].get<int64_t>());
  EXPECT_EQ(a.shape[1], 64);
  // Logits are dumped too, one row per head execution.
  r = run_cli("run -m " + q(evb) + " --raw -p 'hello' -n 1 --temp 0 --json --dump " +
              q(t.path() / "l") + " --dump-filter logits");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(t.path() / "l")) {
    EXPECT_EQ(read_npy(e.path()).shape, (std::vector<int64_t>{1, 512}));
    ++n;
  }
  EXPECT_EQ(n, 1u);
}

TEST(CliErrors, UnreadablePaths) {
  expect_clean_error(run_cli("run -m /nonexistent/m.evb -p hi"),
                     {"/nonexistent/m.evb", "cannot open"});
  expect_clean_error(run_cli("compile /nonexistent/dir -o /tmp/x.evb"), {"/nonexistent/dir"});
}

TEST(CliErrors, TruncatedAndCorruptedBinary) {
  TempDir t;
  const auto good = read_bytes(test::compiled_path(golden_dir("llama"), "f32"));
  auto bytes = good;
  bytes.resize(bytes.size() / 2);
  write_bytes(t.path() / "trunc.evb", bytes);
  expect_clean_error(run_cli("run -m " + q(t.path() / "trunc.evb") + " -p hi"),
                     {"trunc.evb", "truncated"});
  bytes.resize(20);
  write_bytes(t.path() / "tiny.evb", bytes);
  expect_clean_error(run_cli("inspect " + q(t.path() / "tiny.evb")), {"tiny.evb", "header"});

  bytes = good;
  bytes[0] = 'X';
  write_bytes(t.path() / "magic.evb", bytes);
  expect_clean_error(run_cli("inspect " + q(t.path() / "magic.evb")), {"magic.evb", "offset 0"});

  bytes = good;
  bytes[8] = 99;  // format version
  write_bytes(t.path() / "ver.evb", bytes);
  expect_clean_error(run_cli("inspect " + q(t.path() / "ver.evb")),
                     {"ver.evb", "version 99", "recompile"});

  bytes = good;
#if defined(__aarch64__)
  bytes[12] = uint8_t(TargetIsa::X86_64);  // the other ISA family
#else
  bytes[12] = uint8_t(TargetIsa::AArch64);
#endif
  write_bytes(t.path() / "target.evb", bytes);
  expect_clean_error(run_cli("inspect " + q(t.path() / "target.evb")),
                     {"target.evb", "compiled for target", "recompile"});
}

TEST(CliErrors, CorruptedTensorTable) {
  TempDir t;
  auto bytes = read_bytes(test::compiled_path(golden_dir("llama"), "f32"));
  EvbFile f(test::compiled_path(golden_dir("llama"), "f32"));
  // Point the first tensor's offset far outside the weights section.
  const size_t table = f.section_offset(SectionId::Tensors);
  const std::string& name = f.tensors()[0].name;
  const size_t ndim = f.tensors()[0].shape.size();
  const size_t off_pos = table + 4 + 4 + name.size() + 4 + 8 + 8 * ndim;
  for (int i = 0; i < 8; ++i) bytes[off_pos + i] = 0x7f;
  write_bytes(t.path() / "table.evb", bytes);
  expect_clean_error(run_cli("inspect " + q(t.path() / "table.evb")),
                     {"table.evb", name, "outside the weights section"});
}

TEST(CliErrors, CheckpointProblems) {
  TempDir t;
  const auto src = golden_dir("llama");
  // Unknown architecture.
  auto d = t.path() / "arch";
  std::filesystem::create_directories(d);
  std::filesystem::copy(src, d, std::filesystem::copy_options::recursive);
  auto cfg = nlohmann::json::parse(read_text_file(d / "config.json"));
  cfg["model_type"] = "gpt_neox";
  std::ofstream(d / "config.json") << cfg.dump();
  expect_clean_error(run_cli("compile " + q(d) + " -o " + q(t.path() / "a.evb")), {"gpt_neox"});
  EXPECT_FALSE(std::filesystem::exists(t.path() / "a.evb"));

  // Missing tensors: the config claims more layers than the weights hold.
  d = t.path() / "missing";
  std::filesystem::create_directories(d);
  std::filesystem::copy(src, d, std::filesystem::copy_options::recursive);
  cfg = nlohmann::json::parse(read_text_file(d / "config.json"));
  const int layers = cfg["num_hidden_layers"];
  cfg["num_hidden_layers"] = layers + 1;
  std::ofstream(d / "config.json") << cfg.dump();
  expect_clean_error(
      run_cli("compile " + q(d) + " -o " + q(t.path() / "m.evb")),
      {"missing", "model.layers." + std::to_string(layers) + ".self_attn.q_proj.weight"});
  EXPECT_FALSE(std::filesystem::exists(t.path() / "m.evb"));
  EXPECT_FALSE(std::filesystem::exists(t.path() / "m.evb.partial"));

  // Corrupted safetensors header.
  d = t.path() / "badst";
  std::filesystem::create_directories(d);
  std::filesystem::copy(src, d, std::filesystem::copy_options::recursive);
  auto st = read_bytes(d / "model.safetensors");
  st[8] = '#';
  write_bytes(d / "model.safetensors", st);
  expect_clean_error(run_cli("compile " + q(d) + " -o " + q(t.path() / "b.evb")),
                     {"model.safetensors"});
}

TEST(CliErrors, PromptLongerThanContext) {
  const auto evb = test::compiled_path(golden_dir("qwen2"), "f32");  // context 512
  expect_clean_error(run_cli("run -m " + q(evb) + " --raw -p 'hello there' -n 600"),
                     {"exceeds", "600", "512"});
  expect_clean_error(run_cli("run -m " + q(evb) + " --raw -p hi -n 4 --ctx 4096"),
                     {"4096", "512", "recompile"});
}

}  // namespace
}  // namespace edgevl
