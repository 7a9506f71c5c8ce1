// `edgevl bench` on tiny golden fixtures: the JSON report's shape, and its refusals.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

#include "backend/cpu/kernels.h"
#include "core/temp_dir.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"
#include "support/test_util.h"

namespace edgevl {
namespace {

std::filesystem::path fixture(const std::string& name) {
  return test::compiled_path(test::fixtures_dir() / "golden" / name, "f16");
}

TEST(CliBench, JsonReportHasEveryTest) {
  auto r = test::run_cli("bench -m " + test::shell_quote(fixture("qwen2")) +
                         " -t 1 --pp 8 --tg 2 --depth 0,4 --reps 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> names;
  for (const auto& t : j["tests"]) {
    names.push_back(t["name"]);
    EXPECT_GT(t["tok_s"].get<double>(), 0) << t.dump();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"pp8", "tg2@d0", "tg2@d4"}));
  EXPECT_EQ(j["threads"], 1);
  for (const char* k : {"kernels", "cpu", "peak_rss_mb", "load_ms"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_TRUE(j["kernels"].contains("matmul_q8"));
}

TEST(CliBench, ImageTestsOnAVisionModel) {
  auto r = test::run_cli("bench -m " + test::shell_quote(fixture("internvl_qwen2")) +
                         " -t 2 --pp 4 --tg 1 --reps 1 --image --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  bool vision = false, ttft = false;
  for (const auto& t : j["tests"]) {
    if (t["name"] == "vision") vision = t["ms_per_tile"].get<double>() > 0;
    if (t["name"] == "ttft") ttft = t["ms"].get<double>() > 0;
  }
  EXPECT_TRUE(vision) << r.out;
  EXPECT_TRUE(ttft) << r.out;
}

// A Qwen-VL tower: one vision test per --image-size (its patches and tokens reported, the cost
// at those patches), ttft at the first size; a malformed size is refused before any test.
TEST(CliBench, ImageTestsOnAQwenVlModel) {
  const std::string model = test::shell_quote(fixture("qwen3vl"));
  auto r = test::run_cli("bench -m " + model +
                         " -t 2 --pp 4 --tg 1 --reps 1 --image --image-size 64x64,100x60 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> names;
  for (const auto& t : j["tests"]) {
    names.push_back(t["name"]);
    if (t["name"].get<std::string>().rfind("vision@", 0) != 0) continue;
    EXPECT_GT(t["ms_per_image"].get<double>(), 0) << t.dump();
    EXPECT_GT(t["gflop"].get<double>(), 0) << t.dump();
    EXPECT_GT(t["image_tokens"].get<int64_t>(), 0) << t.dump();
    EXPECT_EQ(t["patches"].get<int64_t>(), 4 * t["image_tokens"].get<int64_t>()) << t.dump();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"pp4", "tg1@d0", "vision@64x64", "vision@100x60",
                                             "ttft@64x64"}));
  r = test::run_cli("bench -m " + model + " --image --image-size 64by64");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--image-size 64by64"), std::string::npos) << r.err;
}

// --verify times one pass per path and k; with --profile each pass gets its per-op table, and
// --trace writes them all as one Chrome trace.
TEST(CliBench, VerifyPassesProfiledAndTraced) {
  TempDir tmp;
  const auto trace = tmp.path() / "verify.json";
  auto r = test::run_cli("bench -m " + test::shell_quote(fixture("qwen2")) +
                         " -t 1 --verify 2 --depth 0,3 --reps 1 --profile --trace " +
                         test::shell_quote(trace));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* pass :
       {"d0-decode-1rows", "d0-prefill-3rows", "d3-decode-1rows", "d3-prefill-3rows"})
    EXPECT_NE(r.out.find(std::string("profile of ") + pass), std::string::npos) << pass << r.out;
  EXPECT_NE(r.out.find("matmul"), std::string::npos) << r.out;
  std::ifstream f(trace);
  ASSERT_TRUE(f.good());
  const auto j = nlohmann::json::parse(f);
  const auto& ev = j.is_object() ? j["traceEvents"] : j;
  EXPECT_GT(ev.size(), 4u);
}

TEST(CliBench, Refusals) {
  auto r = test::run_cli("bench -m " + test::shell_quote(fixture("qwen2")) + " --depth 100000");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("context"), std::string::npos) << r.err;
  r = test::run_cli("bench -m " + test::shell_quote(fixture("qwen2")) + " --image");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("text-only"), std::string::npos) << r.err;
}

// --isa runs the named level and reports it; "scalar" runs on every CPU. An unknown level or
// one the CPU lacks is refused before anything runs (EDGEVL_ISA likewise).
TEST(CliBench, IsaLevel) {
  const std::string model = test::shell_quote(fixture("qwen2"));
  auto r = test::run_cli("bench -m " + model + " -t 1 --pp 4 --tg 1 --reps 1 --json --isa scalar");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["isa"], "scalar");
  EXPECT_EQ(j["kernels"]["matmul_q8"], "scalar");
  r = test::run_cli("bench -m " + model + " --isa avx9000");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("unknown ISA level 'avx9000'"), std::string::npos) << r.err;
  r = test::run_cli("run -m " + model + " -p hi -n 1 --isa avx9000");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  for (const std::string& l : cpu::isa_levels()) {
    const std::string missing = cpu::isa_missing_features(l);
    if (missing.empty()) continue;
    setenv("EDGEVL_ISA", l.c_str(), 1);  // the child inherits it
    r = test::run_cli("bench -m " + model);
    unsetenv("EDGEVL_ISA");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("lacks " + missing), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace edgevl
