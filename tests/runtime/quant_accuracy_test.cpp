// Quantized presets against the float model, teacher-forced: top-1 agreement and mean KL
// divergence of the next-token distributions. On the real stories260K model (text = its
// 200-token golden continuation) and on the golden fixtures' prompts. Thresholds were set
// from measurement (printed), with headroom.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <memory>

#include "compiler/compile.h"
#include "compiler/quant_report.h"
#include "core/mapped_file.h"
#include "runtime/execution/session.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

using compiler::Agreement;

Agreement compare(const Model& ref, const Model& q, const std::vector<std::vector<int32_t>>& seqs) {
  return compiler::compare_models(ref, q, seqs, 2);
}

// The model compiled with calibration on the committed sample texts (cached per test binary).
const Model& calibrated(const std::filesystem::path& dir, const std::string& quant) {
  static std::map<std::string, std::unique_ptr<Model>> cache;
  static TempDir tmp;
  auto& m = cache[dir.string() + quant];
  if (!m) {
    compiler::CompileOptions o;
    o.input = dir;
    o.output = tmp.path() / (dir.filename().string() + "-" + quant + "-calib.evb");
    o.quant = quant;
    o.calib = test::fixtures_dir() / "calib" / "stories_calib.jsonl";
    o.threads = 2;
    o.prefill_chunk = 16;
    compiler::compile_model(o);
    m = std::make_unique<Model>(o.output);
  }
  return *m;
}

// stories260k's prompt + golden continuation, less the last token: every position predicts the
// next golden token.
std::vector<int32_t> golden_positions(const std::filesystem::path& dir) {
  const auto g = nlohmann::json::parse(read_text_file(dir / "golden_greedy.json"));
  std::vector<int32_t> seq = g["prompt_ids"];
  for (int32_t id : g["greedy_ids"]) seq.push_back(id);
  seq.pop_back();
  return seq;
}

struct Bound {
  const char* quant;
  double min_top1;
  double max_kl;
};

TEST(QuantAccuracy, Stories260kAgainstF32) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  const std::vector<int32_t> seq = golden_positions(dir);
  const Model& ref = test::compiled_model(dir, "f32");
  // Measured without calibration, 200 positions. Before the block Hadamard rotation and the
  // searched Q4 scales (2026-12-03): w8a8 0.980 / KL 0.00105, w4a8 0.925 / 0.0721, w4a16 0.930 /
  // 0.0703. With them (2026-12-05): w8a8 0.985 / 0.00061, w4a8 0.905 / 0.0439, w4a16 0.905 /
  // 0.0432 (over the 1735 tokens of tests/fixtures/calib, a text 8.6x longer: w8a8 top-1 0.972 ->
  // 0.980, w4a8 0.788 -> 0.830; bench/results/2026-12-05-quant-rotation.md). The w8a8 misses are
  // near-ties (float top-2 margins of 0.004-0.07 logits; on an AVX2-only Zen 3 one more falls the
  // other way with the float reference's other summation order), so top-1 allows 0.98 and KL
  // carries the check: the bounds fail without the rotation.
  for (const Bound& b :
       {Bound{"w8a8", 0.98, 0.0008}, Bound{"w4a8", 0.88, 0.055}, Bound{"w4a16", 0.88, 0.055}}) {
    const Agreement a = compare(ref, test::compiled_model(dir, b.quant), {seq});
    std::printf("[ quant    ] stories260k %s: top-1 %.4f, mean KL %.5f over %lld positions\n",
                b.quant, a.top1, a.mean_kl, (long long)a.positions);
    EXPECT_GE(a.top1, b.min_top1) << b.quant;
    EXPECT_LE(a.mean_kl, b.max_kl) << b.quant;
  }
}

// Qwen3-VL's LLM (tests/fixtures/golden/qwen3vl: random bf16 weights, no shared data): its
// projections go through the same quantization tables as the other families'. Over the text
// prompts and the greedy run of the golden. Measured (2026-12-04): w8a8 top-1 0.875, KL 0.063
// over 120 positions (the qwen3 text golden, same init, same check: 0.923 / 0.051: these tiny
// random models have far sharper, less separated logits than trained ones); f16 1.0 / 0.
TEST(QuantAccuracy, Qwen3VlTextAgainstF32) {
  const auto dir = test::fixtures_dir() / "golden" / "qwen3vl";
  const auto g = nlohmann::json::parse(read_text_file(dir / "golden.json"));
  std::vector<std::vector<int32_t>> seqs;
  for (const auto& p : g["prompts"]) seqs.push_back(p["ids"].get<std::vector<int32_t>>());
  std::vector<int32_t> run = g["greedy"]["prompt_ids"];
  for (int32_t id : g["greedy"]["tokens"]) run.push_back(id);
  seqs.push_back(run);
  const Model& ref = test::compiled_model(dir, "f32");
  for (const Bound& b : {Bound{"w8a8", 0.80, 0.1}, Bound{"f16", 0.99, 1e-4}}) {
    const Agreement a = compare(ref, test::compiled_model(dir, b.quant), seqs);
    std::printf("[ quant    ] qwen3vl %s: top-1 %.4f, mean KL %.5f over %lld positions\n", b.quant,
                a.top1, a.mean_kl, (long long)a.positions);
    EXPECT_GE(a.top1, b.min_top1) << b.quant;
    EXPECT_LE(a.mean_kl, b.max_kl) << b.quant;
  }
}

// The runtime's large-call routes, which the chunk-16 models above never take: W4A8 prefill
// with the weights requantized to int8 (quant.h, fast_prefill) and F16 linear layers through
// the four-product split (matmul_f16_weights), both from 24 / 32 rows on. Compiled with 64-token
// chunks, so the 200-position text runs as 64-row calls (on CPUs without AMX this checks the
// integer / f32 kernels at that size instead).
TEST(QuantAccuracy, Stories260kLargePrefillCalls) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  const std::vector<int32_t> seq = golden_positions(dir);
  const Model& ref = test::compiled_model(dir, "f32");
  TempDir tmp;
  const auto compile = [&](const std::string& quant) {
    compiler::CompileOptions o;
    o.input = dir;
    o.output = tmp.path() / ("stories-" + quant + "-c64.evb");
    o.quant = quant;
    o.threads = 2;
    o.prefill_chunk = 64;
    compiler::compile_model(o);
    return std::make_unique<Model>(o.output);
  };
  // Measured (2026-11-30, AMX): w4a8 top-1 0.920, KL 0.0697 (the chunk-16 W4A8 kernels: 0.930 /
  // 0.0718); rotated, searched scales (2026-12-05, Zen 5 avx512-bf16): 0.895 / 0.0436. f16 top-1
  // 1.0, KL 1e-6 (the f16 weights' own rounding).
  for (const Bound& b : {Bound{"w4a8", 0.88, 0.055}, Bound{"f16", 0.995, 1e-5}}) {
    const auto m = compile(b.quant);
    const Agreement a = compare(ref, *m, {seq});
    std::printf("[ quant    ] stories260k %s, 64-row prefill calls: top-1 %.4f, mean KL %.6f\n",
                b.quant, a.top1, a.mean_kl);
    EXPECT_GE(a.top1, b.min_top1) << b.quant;
    EXPECT_LE(a.mean_kl, b.max_kl) << b.quant;
  }
}

// Calibration on tests/fixtures/calib (16 short stories written for this test, none of them the
// golden text) against the uncalibrated presets, over the same golden positions.
TEST(QuantAccuracy, Stories260kCalibrationLowersKl) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  const std::vector<int32_t> seq = golden_positions(dir);
  const Model& ref = test::compiled_model(dir, "f32");
  // Measured (2026-12-05, rotated presets; Q4 calibration is rescale + GPTQ), plain ->
  // calibrated: w8a8 top-1 0.985 -> 0.975, KL 0.00061 -> 0.00059; w4a8 0.905 -> 0.910, KL 0.0439
  // -> 0.0398; w4a16 0.905 -> 0.905, KL 0.0432 -> 0.0414. On this 64-wide model, 256 recorded
  // rows per input, the gain on the golden text is smaller than on the calibration texts.
  struct CalBound {
    const char* quant;
    double min_top1, max_kl_ratio;
  };
  for (const CalBound& b : {CalBound{"w8a8", 0.975, 1.25}, CalBound{"w4a8", 0.88, 0.97},
                            CalBound{"w4a16", 0.88, 0.97}}) {
    const Agreement plain = compare(ref, test::compiled_model(dir, b.quant), {seq});
    const Agreement cal = compare(ref, calibrated(dir, b.quant), {seq});
    std::printf(
        "[ quant    ] stories260k %s calibrated: top-1 %.4f (plain %.4f), mean KL %.5f "
        "(plain %.5f)\n",
        b.quant, cal.top1, plain.top1, cal.mean_kl, plain.mean_kl);
    EXPECT_GE(cal.top1, b.min_top1) << b.quant;
    EXPECT_LE(cal.mean_kl, plain.mean_kl * b.max_kl_ratio) << b.quant;
  }
}

TEST(QuantAccuracy, GoldenFixturesAgainstF32) {
  for (const std::string model : {"qwen2", "llama", "internlm2"}) {
    const auto dir = test::fixtures_dir() / "golden" / model;
    const auto g = nlohmann::json::parse(read_text_file(dir / "golden.json"));
    std::vector<std::vector<int32_t>> seqs;
    for (const auto& p : g["prompts"]) seqs.push_back(p["ids"]);
    const Model& ref = test::compiled_model(dir, "f32");
    // Random weights drawn with large gains (to make greedy decoding stable) are far less
    // compressible than trained ones; measured: w8a8 top-1 0.88-0.94 / KL 0.019-0.027,
    // w4 top-1 0.41-0.54 / KL 1.5-2.9.
    for (const Bound& b :
         {Bound{"w8a8", 0.85, 0.04}, Bound{"w4a8", 0.35, 3.5}, Bound{"w4a16", 0.35, 3.5}}) {
      const Agreement a = compare(ref, test::compiled_model(dir, b.quant), seqs);
      std::printf("[ quant    ] %s %s: top-1 %.4f, mean KL %.5f over %lld positions\n",
                  model.c_str(), b.quant, a.top1, a.mean_kl, (long long)a.positions);
      EXPECT_GE(a.top1, b.min_top1) << model << " " << b.quant;
      EXPECT_LE(a.mean_kl, b.max_kl) << model << " " << b.quant;
      // Calibrated on English stories (a distribution these random models never saw); the
      // end-to-end check in compile keeps the transforms only when they help on the samples.
      // Measured KL plain -> calibrated: w4a8 qwen2 1.53 -> 1.38, llama 2.17 -> 1.84,
      // internlm2 2.84 -> 1.80; w8a8 qwen2 0.018 -> 0.038, llama unchanged (dropped),
      // internlm2 0.027 -> 0.026.
      const Agreement c = compare(ref, calibrated(dir, b.quant), seqs);
      std::printf("[ quant    ] %s %s calibrated: top-1 %.4f, mean KL %.5f\n", model.c_str(),
                  b.quant, c.top1, c.mean_kl);
      EXPECT_GE(c.top1, b.min_top1) << model << " " << b.quant << " calibrated";
      EXPECT_LE(c.mean_kl, b.max_kl) << model << " " << b.quant << " calibrated";
    }
  }
}

// The int8 KV cache (--kv q8) against the f16 default, both with f16 weights, so only the cache
// differs. Measured (2026-11-30): stories260k (head_dim 8) top-1 0.985 / KL 0.00087; fixtures
// qwen2 0.976 / 0.0011, llama 1.0 / 0.0014, internlm2 0.985 / 0.0035. Bounds with headroom.
TEST(KvQ8Accuracy, Stories260kAgainstF16Kv) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  const auto g = nlohmann::json::parse(read_text_file(dir / "golden_greedy.json"));
  std::vector<int32_t> seq = g["prompt_ids"];
  for (int32_t id : g["greedy_ids"]) seq.push_back(id);
  seq.pop_back();
  const Agreement a = compare(test::compiled_model(dir, "f16", "f16"),
                              test::compiled_model(dir, "f16", "q8"), {seq});
  std::printf(
      "[ kv q8    ] stories260k f16 weights, q8 vs f16 KV: top-1 %.4f, mean KL %.6f over "
      "%lld positions\n",
      a.top1, a.mean_kl, (long long)a.positions);
  EXPECT_GE(a.top1, 0.97);
  EXPECT_LE(a.mean_kl, 0.002);
}

TEST(KvQ8Accuracy, GoldenFixturesAgainstF16Kv) {
  for (const std::string model : {"qwen2", "llama", "internlm2"}) {
    const auto dir = test::fixtures_dir() / "golden" / model;
    const auto g = nlohmann::json::parse(read_text_file(dir / "golden.json"));
    std::vector<std::vector<int32_t>> seqs;
    for (const auto& p : g["prompts"]) seqs.push_back(p["ids"]);
    const Agreement a = compare(test::compiled_model(dir, "f16", "f16"),
                                test::compiled_model(dir, "f16", "q8"), seqs);
    std::printf(
        "[ kv q8    ] %s f16 weights, q8 vs f16 KV: top-1 %.4f, mean KL %.6f over %lld "
        "positions\n",
        model.c_str(), a.top1, a.mean_kl, (long long)a.positions);
    EXPECT_GE(a.top1, 0.95) << model;
    EXPECT_LE(a.mean_kl, 0.007) << model;
  }
}

// Decode (the streaming attention kernel over the q8 cache) and prefill (per-head matmuls over
// K/V dequantized into scratch) read the same quantized cache, so token-by-token logits must
// match the chunked prefill's up to float rounding.
TEST(KvQ8Accuracy, DecodeMatchesPrefill) {
  for (const std::string model : {"qwen2", "internlm2"}) {
    const auto dir = test::fixtures_dir() / "golden" / model;
    const auto g = nlohmann::json::parse(read_text_file(dir / "golden.json"));
    const std::vector<int32_t> ids = g["prompts"][0]["ids"];
    const Model& m = test::compiled_model(dir, "f16", "q8");
    Session pre(m, SessionOptions{2, 0}), dec(m, SessionOptions{2, 0});
    pre.set_all_logits(true);
    pre.eval_tokens(ids);
    const size_t V = size_t(m.config().vocab_size);
    double max_ref = 0, max_diff = 0;
    for (size_t p = 0; p < ids.size(); ++p) {
      const auto got = dec.eval_tokens(std::span<const int32_t>(&ids[p], 1));
      const float* ref = pre.all_logits().data() + p * V;
      for (size_t i = 0; i < V; ++i) {
        max_ref = std::max(max_ref, double(std::fabs(ref[i])));
        max_diff = std::max(max_diff, double(std::fabs(got[i] - ref[i])));
      }
    }
    std::printf("[ kv q8    ] %s decode vs prefill over %zu tokens: max|diff| / max|logit| %.2e\n",
                model.c_str(), ids.size(), max_diff / max_ref);
    EXPECT_LE(max_diff, 2e-5 * max_ref) << model;
  }
}

}  // namespace
}  // namespace edgevl
