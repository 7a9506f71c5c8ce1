// The optional int8 vision tower (`compile --vision-quant w8a8`) against the default bf16
// tower and against transformers (the golden f32 vision features and logits of
// tests/fixtures/golden/internvl_*): what storing the encoder's projections in int8 costs, as
// cosine similarity of the vision embeddings and top-1 / KL of the next-token distribution
// over the image prompt. Bounds are set from measurement (see the printed figures).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include "compiler/compile.h"
#include "core/mapped_file.h"
#include "core/npy.h"
#include "core/temp_dir.h"
#include "format/safetensors.h"
#include "runtime/chat/conversation.h"
#include "support/test_paths.h"
#include "support/vision_fixture.h"

namespace edgevl {
namespace {

using test::fixtures_dir;

double cosine(const float* a, const float* b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i)
    ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

std::vector<double> softmax(std::span<const float> l) {
  double mx = -INFINITY, s = 0;
  for (float v : l) mx = std::max(mx, double(v));
  std::vector<double> p(l.size());
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp(double(l[i]) - mx);
  for (double& v : p) v /= s;
  return p;
}

double kl(std::span<const float> ref, std::span<const float> got) {
  const auto p = softmax(ref), q = softmax(got);
  double d = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0) d += p[i] * std::log(p[i] / std::max(q[i], 1e-300));
  return d;
}

size_t argmax(std::span<const float> l) {
  return size_t(std::max_element(l.begin(), l.end()) - l.begin());
}

struct TowerRun {
  std::vector<float> embeds, logits;
};

TowerRun run_tower(const std::filesystem::path& evb, const nlohmann::json& tc) {
  const Model m(evb);
  Session s(m, SessionOptions{2, 0});
  const vision::Tiles px = test::formula_tiles(1, m.vision()->image_size);
  TowerRun r;
  r.embeds.resize(size_t(256) * size_t(m.config().hidden));
  s.engine().encode_tile(px.pixels.data(), r.embeds.data());
  VisionEncoder enc(s.engine());
  const Prompt p =
      build_chat_prompt(m, {{"user", tc["prompt"]["question"], {enc.prepare_tiles(px)}}});
  const std::vector<float> embeds = prompt_embeddings(s.engine(), &enc, p);
  const auto logits = s.eval_embeddings(embeds.data(), int64_t(p.ids.size()));
  r.logits.assign(logits.begin(), logits.end());
  return r;
}

// The golden fixture's one-tile case.
nlohmann::json one_tile_case(const std::filesystem::path& dir) {
  const auto g = nlohmann::json::parse(read_text_file(dir / "golden.json"));
  for (const auto& tc : g["tiles_case"])
    if (tc["tiles"] == 1) return tc;
  ADD_FAILURE() << dir << ": no one-tile case";
  return {};
}

TEST(VisionInt8, CloseToTheBf16TowerAndTheReference) {
  for (const std::string model : {"internvl_qwen2", "internvl_internlm2"}) {
    const auto dir = fixtures_dir() / "golden" / model;
    const nlohmann::json tile = one_tile_case(dir);
    ASSERT_FALSE(tile.is_null());
    const nlohmann::json* one = &tile;
    TempDir tmp;
    std::map<std::string, TowerRun> runs;
    for (const char* vq : {"bf16", "w8a8"}) {
      compiler::CompileOptions o;
      o.input = dir;
      o.output = tmp.path() / (std::string(vq) + ".evb");
      o.quant = "w8a8";
      o.vision_quant = vq;
      compiler::compile_model(o);
      runs[vq] = run_tower(o.output, *one);
    }
    const NpyArray ref = read_npy(dir / (*one)["vision_embeds"].get<std::string>());
    const NpyArray lref = read_npy(dir / (*one)["prompt"]["logits_last"].get<std::string>());
    const TowerRun &b = runs["bf16"], &q = runs["w8a8"];
    ASSERT_EQ(ref.data.size(), b.embeds.size());
    const size_t n = b.embeds.size();
    const double cos_bf16 = cosine(b.embeds.data(), ref.data.data(), n);
    const double cos_int8 = cosine(q.embeds.data(), ref.data.data(), n);
    const double cos_pair = cosine(q.embeds.data(), b.embeds.data(), n);
    const double kl_pair = kl(b.logits, q.logits), kl_ref = kl(lref.data, q.logits),
                 kl_ref_bf16 = kl(lref.data, b.logits);
    std::printf(
        "[ int8 vis ] %s: cosine vs f32 reference bf16 tower %.6f, int8 tower %.6f; int8 vs "
        "bf16 %.6f; next-token KL int8 vs bf16 %.3g, vs reference %.3g (bf16 tower vs reference "
        "%.3g); top-1 %zu / %zu / %zu (ref / bf16 / int8)\n",
        model.c_str(), cos_bf16, cos_int8, cos_pair, kl_pair, kl_ref, kl_ref_bf16,
        argmax(lref.data), argmax(b.logits), argmax(q.logits));
    EXPECT_GT(cos_pair, 0.99) << model;
    EXPECT_GT(cos_int8, 0.99) << model;
    // Measured 2026-12-01 (avx512-bf16 level, w8a8 LLM in both): KL 0.031 (qwen2) and 5e-4
    // (internlm2) between the towers, cosine 0.99993 against the reference for both.
    EXPECT_LT(kl_pair, 0.06) << model;
    EXPECT_EQ(argmax(q.logits), argmax(b.logits)) << model;
    // The int8 tower really is int8: its binary is smaller than the bf16 one.
    EXPECT_LT(std::filesystem::file_size(tmp.path() / "w8a8.evb"),
              std::filesystem::file_size(tmp.path() / "bf16.evb"));
  }
}

// A copy of `dir` whose vision encoder has outlier channels, computing the same function (as
// tools/vision_outlier_stress.py): channels `ch` of norm1 / norm2 times alpha with the matching
// input columns of qkv / fc1 divided by it, and the same channels' V rows times alpha with
// proj's input columns divided by it.
void write_outlier_copy(const std::filesystem::path& dir, const std::filesystem::path& out,
                        const std::vector<int64_t>& ch, float alpha) {
  std::filesystem::create_directories(out);
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename() != "model.safetensors")
      std::filesystem::copy_file(e.path(), out / e.path().filename());
  const SafetensorsFile f(dir / "model.safetensors");
  std::map<std::string, std::vector<float>> t;
  std::vector<TensorToWrite> w;
  for (const TensorView& v : f.tensors()) {
    t[v.name].resize(size_t(v.numel()));
    tensor_to_f32(v, t[v.name].data());
  }
  const std::string pre = "vision_model.encoder.layers.";
  for (int l = 0; t.count(pre + std::to_string(l) + ".norm1.weight"); ++l) {
    const std::string p = pre + std::to_string(l) + ".";
    const int64_t d = int64_t(t[p + "norm1.weight"].size());
    const auto scale_cols = [&](const std::string& name, int64_t c, float by) {
      std::vector<float>& m = t[name];
      for (size_t r = 0; r < m.size() / size_t(d); ++r) m[r * size_t(d) + size_t(c)] *= by;
    };
    for (int64_t c : ch) {
      for (const char* n : {"norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"})
        t[p + n][size_t(c)] *= alpha;
      scale_cols(p + "attn.qkv.weight", c, 1 / alpha);
      scale_cols(p + "mlp.fc1.weight", c, 1 / alpha);
      const int64_t v_row = 2 * d + c;  // qkv rows: [q; k; v]
      for (int64_t k = 0; k < d; ++k) t[p + "attn.qkv.weight"][size_t(v_row * d + k)] *= alpha;
      t[p + "attn.qkv.bias"][size_t(v_row)] *= alpha;
      scale_cols(p + "attn.proj.weight", c, 1 / alpha);
    }
  }
  for (const TensorView& v : f.tensors()) {
    TensorToWrite o{v.name, "F32", v.shape, {}};
    o.bytes.resize(t[v.name].size() * 4);
    std::memcpy(o.bytes.data(), t[v.name].data(), o.bytes.size());
    w.push_back(std::move(o));
  }
  write_safetensors(out / "model.safetensors", w);
}

// Trained ViTs have activation outlier channels that random weights lack; int8 activations per
// token spend their range on them. The int8 tower's projections are stored rotated against
// that: with outliers injected, the rotated tower must stay far closer to f32 than the same
// tower compiled without the rotation.
TEST(VisionInt8, RotationHoldsOutlierChannels) {
  const auto dir = fixtures_dir() / "golden" / "internvl_qwen2";
  const nlohmann::json tile = one_tile_case(dir);
  ASSERT_FALSE(tile.is_null());
  const nlohmann::json* one = &tile;
  TempDir tmp;
  write_outlier_copy(dir, tmp.path() / "ckpt", {3, 17, 40, 41}, 50.f);
  {
    std::ofstream(tmp.path() / "norot.json")
        << R"({"patterns":[{"pattern":"vision*","rotate":false}]})";
  }
  std::map<std::string, TowerRun> runs;
  for (const char* mode : {"f32", "rotated", "unrotated"}) {
    compiler::CompileOptions o;
    o.input = tmp.path() / "ckpt";
    o.output = tmp.path() / (std::string(mode) + ".evb");
    o.quant = std::string(mode) == "f32" ? "f32" : "w8a8";
    if (o.quant == "w8a8") o.vision_quant = "w8a8";
    if (std::string(mode) == "unrotated") o.overrides = tmp.path() / "norot.json";
    compiler::compile_model(o);
    runs[mode] = run_tower(o.output, *one);
  }
  // The outlier copy computes what the fixture does: its f32 tower still matches the golden.
  const NpyArray ref = read_npy(dir / (*one)["vision_embeds"].get<std::string>());
  const size_t n = runs["f32"].embeds.size();
  ASSERT_EQ(ref.data.size(), n);
  EXPECT_GT(cosine(runs["f32"].embeds.data(), ref.data.data(), n), 0.99999);
  const double rot = cosine(runs["rotated"].embeds.data(), runs["f32"].embeds.data(), n),
               unrot = cosine(runs["unrotated"].embeds.data(), runs["f32"].embeds.data(), n);
  std::printf(
      "[ int8 vis ] outlier channels: embeddings cosine to f32, rotated %.6f, unrotated %.6f\n",
      rot, unrot);
  EXPECT_LT(1 - rot, 0.5 * (1 - unrot));
}

TEST(VisionInt8, RefusedForTextOnlyModelsAndUnknownNames) {
  TempDir tmp;
  compiler::CompileOptions o;
  o.input = fixtures_dir() / "golden" / "qwen2";
  o.output = tmp.path() / "x.evb";
  o.quant = "w8a8";
  o.vision_quant = "w8a8";
  EXPECT_THROW(compiler::compile_model(o), Error);
  o.input = fixtures_dir() / "golden" / "internvl_qwen2";
  o.vision_quant = "int3";
  EXPECT_THROW(compiler::compile_model(o), Error);
  EXPECT_FALSE(std::filesystem::exists(o.output));
}

}  // namespace
}  // namespace edgevl
