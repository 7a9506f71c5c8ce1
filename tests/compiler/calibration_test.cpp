// Calibration: sample files, the exactness of the rescaling it folds into the model, and the
// per-layer error measure.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "backend/cpu/hadamard.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"
#include "compiler/calibration.h"
#include "compiler/compile.h"
#include "compiler/gptq.h"
#include "compiler/quant_preset.h"
#include "core/mapped_file.h"
#include "runtime/execution/session.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"
#include "support/test_util.h"

namespace edgevl::compiler {
namespace {

using test::error_of;

std::filesystem::path calib_file() {
  return test::fixtures_dir() / "calib" / "stories_calib.jsonl";
}

TEST(Calibration, SampleFileErrorsNameTheLine) {
  TempDir tmp;
  const auto p = tmp.path() / "c.jsonl";
  auto with = [&](const std::string& text) {
    std::ofstream(p) << text;
    return error_of([&] { read_calib_jsonl(p); });
  };
  EXPECT_NE(with("{\"text\": \"a\"}\n\n{\"txt\": \"b\"}\n").find("c.jsonl:3: expected"),
            std::string::npos);
  EXPECT_NE(with("{\"text\": \"a\"}\nnot json\n").find("c.jsonl:2: not a JSON object"),
            std::string::npos);
  EXPECT_NE(with("{\"text\": \"a\", \"image\": \"missing.jpg\"}\n").find("missing.jpg not found"),
            std::string::npos);
  EXPECT_NE(with("\n  \n").find("no samples"), std::string::npos);
  EXPECT_NE(error_of([&] { read_calib_jsonl(tmp.path() / "none.jsonl"); }).find("no such file"),
            std::string::npos);
  std::ofstream(p) << "{\"text\": \"hello\"}\n";
  const auto s = read_calib_jsonl(p);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].text, "hello");
  EXPECT_TRUE(s[0].image.empty());
}

// Calibration only moves scale between a projection and what feeds it: compiled in float,
// the transformed model must compute the same function as the original.
TEST(Calibration, RescalingLeavesTheFloatModelUnchanged) {
  for (const std::string model : {"qwen2", "internlm2"}) {
    const auto dir = test::fixtures_dir() / "golden" / model;
    TempDir tmp;
    CompileOptions q;
    q.input = dir;
    q.output = tmp.path() / "q.evb";
    q.quant = "w4a8";
    q.calib = calib_file();
    q.calib_check = false;  // keep the transforms whatever their end-to-end effect
    q.threads = 2;
    const CompileSummary qs = compile_model(q);
    ASSERT_TRUE(qs.calibrated);
    ASSERT_TRUE(qs.transforms);
    EXPECT_GT(qs.calibration.scaled, 0) << model;

    CompileOptions f = q;
    f.output = tmp.path() / "f.evb";
    f.quant = "f32";
    f.calib.clear();
    f.transforms = qs.transforms;  // rescales apply; Q4 clip ratios do not (float storage)
    compile_model(f);
    const Model& ref = test::compiled_model(dir, "f32");
    const Model moved(f.output);
    Session a(ref, SessionOptions{2, 0}), b(moved, SessionOptions{2, 0});
    const std::vector<int32_t> ids{1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 11, 12, 13, 14, 15, 16, 17, 18};
    const auto la = a.eval_tokens(ids);
    const std::vector<float> ra(la.begin(), la.end());
    const auto lb = b.eval_tokens(ids);
    double max_abs = 0, max_ref = 0;
    for (size_t i = 0; i < ra.size(); ++i) {
      max_abs = std::max(max_abs, double(std::fabs(ra[i] - lb[i])));
      max_ref = std::max(max_ref, double(std::fabs(ra[i])));
    }
    EXPECT_LT(max_abs / max_ref, 1e-4) << model;
    // Something really moved: the stored norm weights differ.
    bool differs = false;
    for (const TensorEntry& e : ref.file().tensors()) {
      if (e.name.find("norm") == std::string::npos || e.name.find("layers.0.") == std::string::npos)
        continue;
      const auto* x = static_cast<const float*>(ref.weight_data(e.name));
      const auto* y = static_cast<const float*>(moved.weight_data(e.name));
      for (int64_t i = 0; i < e.numel(); ++i) differs |= x[i] != y[i];
    }
    EXPECT_TRUE(differs) << model;
  }
}

// Mixed samples on a VLM: the image sample runs through the vision graph and the image prompt,
// and its rows are recorded for the LLM projections like the text sample's.
TEST(Calibration, ImageAndTextSamplesOnAVlm) {
  const auto dir = test::fixtures_dir() / "golden" / "internvl_qwen2";
  TempDir tmp;
  const auto calib = tmp.path() / "mixed.jsonl";
  const auto image = test::fixtures_dir() / "images" / "src" / "square_64.png";
  std::ofstream(calib) << "{\"text\": \"Describe the picture.\", \"image\": \"" << image.string()
                       << "\"}\n{\"text\": \"Once upon a time there was a cat.\"}\n";
  const auto samples = read_calib_jsonl(calib);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].image, image);
  CompileOptions f;
  f.input = dir;
  f.output = tmp.path() / "f.evb";
  f.quant = "f32";
  compile_model(f);
  const Model ref(f.output);
  const ActivationMap text_only = collect_activations(ref, {samples[1]}, 2, 64, nullptr);
  const ActivationMap mixed = collect_activations(ref, samples, 2, 4096, nullptr);
  const std::string q = "language_model.model.layers.0.self_attn.q_proj.weight";
  ASSERT_TRUE(mixed.count(q));
  // The image prompt (256 image tokens + template) adds far more rows than the text line.
  EXPECT_GT(mixed.at(q)->rows_seen, text_only.at(q)->rows_seen + 256);
  // The vision tower's projections were recorded too (one tile of 1025 rows).
  bool vision_seen = false;
  for (const auto& [name, st] : mixed)
    if (name.rfind("vision", 0) == 0 && st->rows_seen >= 1025) vision_seen = true;
  EXPECT_TRUE(vision_seen);
  // And a calibrated compile of the VLM goes through.
  CompileOptions c = f;
  c.output = tmp.path() / "c.evb";
  c.quant = "w4a8";
  c.calib = calib;
  c.threads = 2;
  const CompileSummary s = compile_model(c);
  EXPECT_TRUE(s.calibrated);
  EXPECT_GT(s.calibration.groups, 0);
  EXPECT_GE(s.calibration.kl_plain, 0.0);
}

TEST(Calibration, LayerErrorMeasuresTheQuantizedKernel) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  ActivationStats x;
  x.K = 100;
  for (int i = 0; i < 40 * 100; ++i) x.rows.push_back(nd(rng));
  std::vector<float> w(64 * 100);
  for (float& v : w) v = nd(rng);
  cpu::ThreadPool pool(2);
  auto entry = [&](const char* preset) {
    TensorEntry e;
    e.name.assign("w.weight");
    e.shape = {64, 100};
    assign_storage(parse_quant_preset(preset), WeightRole::Linear, WeightPlace::Llm, e);
    return e;
  };
  const LayerError f32 = layer_error(pool, x, w.data(), entry("f32"), nullptr);
  const LayerError q8 = layer_error(pool, x, w.data(), entry("w8a8"), nullptr);
  const LayerError q4 = layer_error(pool, x, w.data(), entry("w4a16"), nullptr);
  EXPECT_LT(f32.rel_l2, 1e-6);
  // Int8 weights and activations: ~ 6 dB per bit, less the crest factor of Gaussian data.
  EXPECT_GT(q8.sqnr_db, 30);
  EXPECT_LT(q8.sqnr_db, 45);
  EXPECT_GT(q4.sqnr_db, 12);
  EXPECT_LT(q4.sqnr_db, q8.sqnr_db);
  EXPECT_NEAR(q4.rel_l2, std::pow(10.0, -q4.sqnr_db / 20), 1e-9);
}

// GPTQ's grid: its values are on the Q4 grid the packing rule picks (packing and unpacking them
// gives them back exactly, unrotated and rotated), and on the recorded rows the compensated
// matrix's output error is below that of plain rounding, which is what GPTQ is for.
TEST(Calibration, GptqGridPacksToItselfAndLowersTheError) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  const int64_t N = 24, K = 96, M = 64;
  std::vector<float> w(size_t(N * K)), x(size_t(M * K));
  for (float& v : w) v = nd(rng);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = nd(rng) * float(1 + i % size_t(K) % 7);  // uneven channels
  cpu::ThreadPool pool(2);
  const char* preset = "w4a8";
  {
    for (bool rotated : {false, true}) {
      TensorEntry e;
      e.name.assign("w.weight");
      e.shape = {N, K};
      assign_storage(parse_quant_preset(preset), WeightRole::Linear, WeightPlace::Llm, e);
      if (!rotated) e.rotation = 0;
      ASSERT_EQ(e.rotation != 0, rotated);
      const GptqGrid g = gptq_q4(pool, w.data(), e, x.data(), M);
      ASSERT_EQ(g.codes.size(), size_t(N * K));
      for (int8_t c : g.codes) ASSERT_TRUE(c >= -8 && c <= 7);
      std::vector<float> v(size_t(N * K)), back(size_t(N * K));
      g.values(v.data());
      // As store_tensor does: rotate, pack; the kernels see the unpacked rotated values.
      std::vector<float> vr = v;
      if (e.rotation) cpu::hadamard_rows(vr.data(), N, K, e.rotation);
      std::vector<uint8_t> packed(cpu::q4_packed_bytes(N, K, e.group, false));
      cpu::q4_pack(vr.data(), N, K, e.group, false, packed.data());
      cpu::q4_unpack(packed.data(), N, K, e.group, false, back.data());
      for (size_t i = 0; i < back.size(); ++i)
        ASSERT_NEAR(back[i], vr[i], 1e-6f * (1 + std::fabs(vr[i]))) << preset << " " << i;
      // Output error on the rows: GPTQ against rounding each weight (the plain packing).
      std::vector<float> plain = w, plain_back(size_t(N * K));
      if (e.rotation) cpu::hadamard_rows(plain.data(), N, K, e.rotation);
      cpu::q4_pack(plain.data(), N, K, e.group, false, packed.data());
      cpu::q4_unpack(packed.data(), N, K, e.group, false, plain_back.data());
      if (e.rotation) cpu::hadamard_rows(plain_back.data(), N, K, e.rotation);
      double err_gptq = 0, err_plain = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double ref = 0, a = 0, b = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double xv = x[size_t(m * K + k)];
            ref += xv * w[size_t(n * K + k)];
            a += xv * v[size_t(n * K + k)];
            b += xv * plain_back[size_t(n * K + k)];
          }
          err_gptq += (a - ref) * (a - ref);
          err_plain += (b - ref) * (b - ref);
        }
      std::printf("[ gptq ] rotated=%d: output error %.4g against %.4g rounded\n", int(rotated),
                  err_gptq, err_plain);
      EXPECT_LT(err_gptq, 0.8 * err_plain) << preset << " rotated=" << rotated;
    }
  }
}

}  // namespace
}  // namespace edgevl::compiler
