// Quantized presets against the float model, teacher-forced: top-1 agreement and mean KL
// divergence of the next-token distributions. On the real stories260K model (text = its
// 200-token golden continuation) and on the golden fixtures' prompts. Thresholds were set
// from measurement (printed), with headroom.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "core/mapped_file.h"
#include "runtime/session.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

struct Agreement {
  double top1 = 0;
  double mean_kl = 0;
  int64_t positions = 0;
};

std::vector<double> log_softmax(const float* x, int64_t n) {
  double m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, double(x[i]));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(double(x[i]) - m);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - m - std::log(s);
  return out;
}

// Compares all-position logits of `q` against `ref` over the same token sequences.
Agreement compare(const Model& ref, const Model& q, const std::vector<std::vector<int32_t>>& seqs) {
  Session a(ref, SessionOptions{2, 0}), b(q, SessionOptions{2, 0});
  a.set_all_logits(true);
  b.set_all_logits(true);
  const int64_t V = ref.config().vocab_size;
  Agreement r;
  int64_t agree = 0;
  for (const auto& ids : seqs) {
    a.reset();
    b.reset();
    a.eval_tokens(ids);
    b.eval_tokens(ids);
    for (size_t p = 0; p < ids.size(); ++p) {
      const float* la = a.all_logits().data() + p * size_t(V);
      const float* lb = b.all_logits().data() + p * size_t(V);
      agree += std::max_element(la, la + V) - la == std::max_element(lb, lb + V) - lb;
      const auto pa = log_softmax(la, V), pb = log_softmax(lb, V);
      double kl = 0;
      for (int64_t i = 0; i < V; ++i)
        kl += std::exp(pa[size_t(i)]) * (pa[size_t(i)] - pb[size_t(i)]);
      r.mean_kl += kl;
      ++r.positions;
    }
  }
  r.top1 = double(agree) / double(r.positions);
  r.mean_kl /= double(r.positions);
  return r;
}

struct Bound {
  const char* quant;
  double min_top1;
  double max_kl;
};

TEST(QuantAccuracy, Stories260kAgainstF32) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  const auto g = nlohmann::json::parse(read_text_file(dir / "golden_greedy.json"));
  std::vector<int32_t> seq = g["prompt_ids"];
  for (int32_t id : g["greedy_ids"]) seq.push_back(id);
  seq.pop_back();  // every position predicts the next golden token
  const Model& ref = test::compiled_model(dir, "f32");
  // Measured without calibration (2026-11-30): w8a8 0.980-0.985 / KL 0.0010, w4a8 0.925 / 0.071,
  // w4a16 0.930 / 0.0703. The quantization issue's goal for w8a8 is 0.99: not reached yet
  // (4 of 200 positions differ); the bound below guards what we have.
  for (const Bound& b :
       {Bound{"w8a8", 0.975, 0.002}, Bound{"w4a8", 0.90, 0.1}, Bound{"w4a16", 0.90, 0.1}}) {
    const Agreement a = compare(ref, test::compiled_model(dir, b.quant), {seq});
    std::printf("[ quant    ] stories260k %s: top-1 %.4f, mean KL %.5f over %lld positions\n",
                b.quant, a.top1, a.mean_kl, (long long)a.positions);
    EXPECT_GE(a.top1, b.min_top1) << b.quant;
    EXPECT_LE(a.mean_kl, b.max_kl) << b.quant;
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
