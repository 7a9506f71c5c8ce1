// `edgevl quant-report` end to end on the real stories260k model: the JSON contract, the
// per-layer table, and --write-overrides producing a file compile accepts.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "core/mapped_file.h"
#include "runtime/execution/model.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"
#include "support/test_util.h"

namespace edgevl {
namespace {

using test::run_cli;
using test::shell_quote;

TEST(QuantReportCli, JsonHasTheIssuesKeysAndLayersWorstFirst) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  const auto r = run_cli("quant-report " + shell_quote(dir) + " --quant w4a8 --json -q -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"top1_agreement", "mean_kl", "perplexity", "perplexity_float", "layers"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_TRUE(j["perplexity"].is_null());  // no --text given
  EXPECT_GT(j["top1_agreement"].get<double>(), 0.8);
  EXPECT_GT(j["mean_kl"].get<double>(), 0.0);
  // 5 layers x 7 projections quantized to Q4; the tied embedding / lm_head Q8 (int8
  // activations, as the layers) is measured on the final norm's rows.
  ASSERT_EQ(j["layers"].size(), 36u);
  double prev = -1e9;
  for (const auto& l : j["layers"]) {
    EXPECT_GE(l["sqnr_db"].get<double>(), prev);
    prev = l["sqnr_db"].get<double>();
    EXPECT_NEAR(l["rel_l2"].get<double>(), std::pow(10.0, -prev / 20), 1e-6);
    const std::string type = l["type"];
    EXPECT_TRUE(type == "q4g32a8" || type == "q8a8") << type;
  }
}

TEST(QuantReportCli, Int8KvShowsItsBytesAndCost) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  auto report = [&](const char* kv) {
    const auto r =
        run_cli("quant-report " + shell_quote(dir) + " --quant w8a8 --json -q -t 2 --kv " + kv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto f16 = report("f16"), q8 = report("q8");
  EXPECT_EQ(f16["kv_type"], "f16");
  EXPECT_EQ(q8["kv_type"], "q8");
  // head_dim 8: 8 int8 + a 4-byte scale per token and head against 16 bytes.
  EXPECT_LT(q8["kv_bytes"].get<double>(), 0.8 * f16["kv_bytes"].get<double>());
  EXPECT_GE(q8["mean_kl"].get<double>(), f16["mean_kl"].get<double>());
  EXPECT_LT(q8["mean_kl"].get<double>(), 0.01);
}

TEST(QuantReportCli, TextGivesPerplexityAndWriteOverridesProtectsWorstLayers) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  TempDir tmp;
  const auto text = tmp.path() / "eval.txt";
  const auto g = nlohmann::json::parse(read_text_file(dir / "golden_greedy.json"));
  std::ofstream(text) << g["text"].get<std::string>();
  const auto keep = tmp.path() / "keep.json";
  const auto r =
      run_cli("quant-report " + shell_quote(dir) + " --quant w4a8 --text " + shell_quote(text) +
              " --write-overrides " + shell_quote(keep) + " --target-kl 0.02 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("perplexity"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layer (worst first)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("target met"), std::string::npos) << r.out;
  const auto o = nlohmann::json::parse(read_text_file(keep));
  const auto& m = o["tensor_quantization_overrides"];
  ASSERT_GT(m.size(), 0u);
  // The file compiles, and the protected layers are stored as it says.
  const auto evb = tmp.path() / "m.evb";
  const auto c = run_cli("compile " + shell_quote(dir) + " -o " + shell_quote(evb) +
                         " --quant w4a8 -q --overrides " + shell_quote(keep));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const Model model(evb);
  for (const auto& [name, v] : m.items())
    EXPECT_EQ(model.weight(name).dtype, v["type"] == "q8" ? DType::Q8 : DType::F16) << name;
}

TEST(QuantReportCli, BadInputIsAClearError) {
  const auto r = run_cli("quant-report /nonexistent/dir --quant w4a8 -q");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  const auto dir = test::fixtures_dir() / "golden" / "llama";
  const auto t = run_cli("quant-report " + shell_quote(dir) + " --text /nonexistent.txt -q");
  EXPECT_NE(t.exit_code, 0);
  EXPECT_NE(t.err.find("--text /nonexistent.txt: no such file"), std::string::npos) << t.err;
  const auto q = run_cli("quant-report " + shell_quote(dir) + " --quant w5a8 -q");
  EXPECT_NE(q.exit_code, 0);
  EXPECT_NE(q.err.find("unknown --quant 'w5a8'"), std::string::npos) << q.err;
}

// On a VLM the report compares the vision towers: an int8 tower is close to the f32 one but
// not identical, and its own share of the next-token KL is reported apart from the LLM's.
TEST(QuantReportCli, VisionTowerSection) {
  const auto dir = test::fixtures_dir() / "golden" / "internvl_qwen2";
  const auto r = run_cli("quant-report " + shell_quote(dir) +
                         " --quant w8a8 --vision-quant w8a8 --json -q -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("vision")) << r.out;
  const auto& v = j["vision"];
  EXPECT_EQ(v["storage"], "q8a8");
  EXPECT_GT(v["cosine"].get<double>(), 0.999);
  EXPECT_LT(v["cosine"].get<double>(), 1.0);
  EXPECT_GT(v["kl_tower"].get<double>(), 0.0);
  // One position of a 64-wide random model whose head rounds its input to int8 (the w8a8
  // default): 0.023 with a float-activation head, 0.062 with the int8 one.
  EXPECT_LT(v["kl_tower"].get<double>(), 0.1);
  const auto bad = run_cli("quant-report " + shell_quote(dir) + " --quant w8a8 --vision-quant q3");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("unknown --vision-quant 'q3'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace edgevl
