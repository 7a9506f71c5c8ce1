// Qwen3-VL's LLM on image prompts against transformers (tests/fixtures/golden/qwen3vl, made by
// tools/golden/make_qwen3vl_goldens.py): the chat-template prompt with its image tokens, the
// image rows and DeepStack features taken from the reference's vision tower outputs (the
// golden files), 3D MRoPE positions from runtime/execution/rope_positions.h, DeepStack added
// after the first decoder layers, then greedy decoding at cache position + rope_delta.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/npy.h"
#include "runtime/execution/engine.h"
#include "runtime/execution/rope_positions.h"
#include "runtime/execution/session.h"
#include "support/cli_image_run.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"
#include "support/test_util.h"
#include "vision/image.h"
#include "vision/qwen_vl_preprocess.h"
#include "vision/vision_test_util.h"

namespace edgevl {
namespace {

const std::filesystem::path kDir = test::fixtures_dir() / "golden" / "qwen3vl";

nlohmann::json read_json(const std::string& name) {
  return nlohmann::json::parse(read_text_file(kDir / name));
}

TEST(GoldenQwen3Vl, PositionsMatchGetRopeIndex) {
  const auto g = read_json("golden.json");
  const int32_t image_token = read_json("config.json")["image_token_id"];
  for (const auto& p : g["image_prompts"]) {
    const std::vector<int32_t> ids = p["prompt_ids"];
    const MergedGrid grid{p["grid_thw"][1].get<int32_t>() / 2, p["grid_thw"][2].get<int32_t>() / 2};
    const RopePositions r = mrope_positions(ids, image_token, std::span(&grid, 1));
    const std::vector<std::vector<int32_t>> want = p["positions_thw"];  // [axis][token]
    for (size_t i = 0; i < ids.size(); ++i)
      for (size_t a = 0; a < 3; ++a) ASSERT_EQ(r.thw[3 * i + a], want[a][i]) << i << " axis " << a;
    EXPECT_EQ(r.rope_delta, p["rope_delta"].get<int32_t>());
  }
  // A run whose length is not the grid's is refused.
  const std::vector<int32_t> ids = {1, image_token, image_token, 2};
  const MergedGrid wrong{2, 2};
  EXPECT_THROW(mrope_positions(ids, image_token, std::span(&wrong, 1)), Error);
  EXPECT_THROW(mrope_positions(ids, image_token, {}), Error);
}

// max|a - b| / max|b|.
double rel_diff(std::span<const float> a, std::span<const float> b) {
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    max_ref = std::max(max_ref, double(std::fabs(b[i])));
    max_diff = std::max(max_diff, double(std::fabs(a[i] - b[i])));
  }
  return max_diff / max_ref;
}

// The vision tower on the reference's pixel values (every golden image: photos whose grids
// differ from the position table's, odd sizes): the merger's rows and each DeepStack
// feature's, to 1e-4 of the largest value at f32.
TEST(GoldenQwen3Vl, VisionTowerMatchesReference) {
  const auto g = read_json("golden.json");
  const Model& m = test::compiled_model(kDir, "f32");
  Engine engine(m, EngineOptions{2});
  ASSERT_EQ(engine.qwen_max_patches(), 64);  // max_pixels 16384 / 16^2
  const size_t d = size_t(m.config().hidden);
  for (const auto& e : g["images"]) {
    const std::string name = e["name"];
    SCOPED_TRACE(name);
    const int32_t gh = e["grid_thw"][1], gw = e["grid_thw"][2];
    const NpyArray px = read_npy(kDir / e["pixels"].get<std::string>());
    const size_t tokens = size_t(gh * gw / 4);
    std::vector<float> out(tokens * d), ds(2 * tokens * d);
    engine.encode_qwen_image(px.data.data(), gh, gw, out.data(), ds.data());
    const NpyArray ref = read_npy(kDir / e["vision"].get<std::string>());
    ASSERT_EQ(ref.data.size(), out.size());
    const double worst = rel_diff(out, ref.data);
    EXPECT_LE(worst, 1e-4);
    double worst_ds = 0;
    for (size_t k = 0; k < 2; ++k) {
      const NpyArray r = read_npy(kDir / e["deepstack"][k].get<std::string>());
      ASSERT_EQ(r.data.size(), tokens * d);
      worst_ds =
          std::max(worst_ds, rel_diff(std::span(ds).subspan(k * tokens * d, tokens * d), r.data));
    }
    EXPECT_LE(worst_ds, 1e-4);
    std::printf("[ golden   ] qwen3vl vision %s (%dx%d patches): merger %.3g, DeepStack %.3g\n",
                name.c_str(), gh, gw, worst, worst_ds);
  }
}

// The tower through the quantized presets' tables (vision matrices as the preset stores them):
// the merger's rows against the reference.
TEST(GoldenQwen3Vl, VisionTowerQuantized) {
  const auto g = read_json("golden.json");
  const auto& e = g["images"][2];  // the procedural 80x144 (4x8 patches)
  const int32_t gh = e["grid_thw"][1], gw = e["grid_thw"][2];
  const NpyArray px = read_npy(kDir / e["pixels"].get<std::string>());
  const NpyArray ref = read_npy(kDir / e["vision"].get<std::string>());
  // Measured (2026-12-04, AVX-512): 0.0036 of the largest value for both (w8a8 stores the
  // vision matrices in bf16, as for InternVL; the weights are bf16 already, so this is the bf16
  // kernels' activations).
  for (const auto& [quant, bound] : {std::pair{"bf16", 0.02}, std::pair{"w8a8", 0.02}}) {
    const Model& m = test::compiled_model(kDir, quant);
    Engine engine(m, EngineOptions{2});
    std::vector<float> out(ref.data.size());
    engine.encode_qwen_image(px.data.data(), gh, gw, out.data());
    const double rel = rel_diff(out, ref.data);
    std::printf("[ quant    ] qwen3vl vision %s: max|diff|/max|ref| = %.3g\n", quant, rel);
    EXPECT_LE(rel, bound) << quant;
  }
}

// One image prompt of the golden, ready for Session::eval_multimodal: the embedded prompt with
// the reference's vision rows at the image tokens, DeepStack rows there (zeros elsewhere), and
// the 3D positions.
struct ImagePrompt {
  std::string image;
  std::vector<int32_t> ids, expected;
  std::vector<float> rows, deepstack;
  RopePositions pos;
  std::string logits_file;
};

ImagePrompt image_prompt(Engine& engine, const nlohmann::json& p) {
  const int32_t image_token = read_json("config.json")["image_token_id"];
  const size_t d = size_t(engine.model().config().hidden);
  const int32_t n_ds = engine.deepstack_layers();
  ImagePrompt ip;
  ip.image = p["image"];
  ip.ids = p["prompt_ids"].get<std::vector<int32_t>>();
  ip.expected = p["tokens"].get<std::vector<int32_t>>();
  ip.logits_file = p["logits"];
  const size_t n = ip.ids.size();
  const MergedGrid grid{p["grid_thw"][1].get<int32_t>() / 2, p["grid_thw"][2].get<int32_t>() / 2};
  ip.pos = mrope_positions(ip.ids, image_token, std::span(&grid, 1));
  ip.rows.resize(n * d);
  ip.deepstack.assign(size_t(n_ds) * n * d, 0.f);
  engine.embed(ip.ids, ip.rows.data());
  const NpyArray vis = read_npy(kDir / ("vision_" + ip.image + ".npy"));
  std::vector<NpyArray> ds;
  for (int32_t k = 0; k < n_ds; ++k)
    ds.push_back(read_npy(kDir / ("deepstack_" + std::to_string(k) + "_" + ip.image + ".npy")));
  size_t j = 0;  // image row
  for (size_t i = 0; i < n; ++i) {
    if (ip.ids[i] != image_token) continue;
    check((j + 1) * d <= vis.data.size(), "more image tokens than vision rows");
    std::copy_n(vis.data.begin() + long(j * d), d, ip.rows.begin() + long(i * d));
    for (int32_t k = 0; k < n_ds; ++k)
      std::copy_n(ds[size_t(k)].data.begin() + long(j * d), d,
                  ip.deepstack.begin() + long((size_t(k) * n + i) * d));
    ++j;
  }
  check(j * d == vis.data.size(), "fewer image tokens than vision rows");
  return ip;
}

int32_t argmax(std::span<const float> v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

// The image prompts' logits at every position and greedy tokens (16 per prompt), with the
// reference's vision outputs; f32 to 1e-4 of the largest logit, as the text goldens.
TEST(GoldenQwen3Vl, ImagePromptGreedyWithReferenceVisionFeatures) {
  const auto g = read_json("golden.json");
  const Model& m = test::compiled_model(kDir, "f32");
  Session s(m, SessionOptions{2, 0});
  ASSERT_EQ(s.engine().deepstack_layers(), 2);  // deepstack_visual_indexes [0, 2]
  for (const auto& p : g["image_prompts"]) {
    const ImagePrompt ip = image_prompt(s.engine(), p);
    SCOPED_TRACE(ip.image);
    s.reset();
    s.set_all_logits(true);
    std::span<const float> logits = s.eval_multimodal(ip.rows.data(), int64_t(ip.ids.size()),
                                                      ip.pos.thw.data(), ip.deepstack.data());
    s.set_all_logits(false);
    EXPECT_EQ(s.rope_delta(), ip.pos.rope_delta);
    const NpyArray ref = read_npy(kDir / ip.logits_file);
    ASSERT_EQ(ref.data.size(), s.all_logits().size());
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < ref.data.size(); ++i) {
      max_ref = std::max(max_ref, double(std::fabs(ref.data[i])));
      max_diff = std::max(max_diff, double(std::fabs(s.all_logits()[i] - ref.data[i])));
    }
    EXPECT_LE(max_diff / max_ref, 1e-4) << "max|diff| " << max_diff << " max|ref| " << max_ref;
    std::printf("[ golden   ] qwen3vl %s: max|diff|/max|ref| = %.3g\n", ip.image.c_str(),
                max_diff / max_ref);
    std::vector<int32_t> got;
    for (size_t t = 0; t < ip.expected.size(); ++t) {
      got.push_back(argmax(logits));
      logits = s.eval_tokens(std::span(&got.back(), 1));
    }
    EXPECT_EQ(got, ip.expected);
  }
}

// The decode paths other than a session's own steps keep each sequence's rope_delta: batched
// decode of two image prompts with different deltas, speculative verification through both
// graphs, and truncate / copy_prefix_from, all equal to the reference's greedy tokens.
TEST(GoldenQwen3Vl, BatchVerifyAndTruncateKeepRopeDelta) {
  const auto g = read_json("golden.json");
  const Model& m = test::compiled_model(kDir, "f32");
  Engine engine(m, EngineOptions{2});
  ASSERT_GE(engine.max_batch(), 2);
  const ImagePrompt a = image_prompt(engine, g["image_prompts"][0]);
  const ImagePrompt b = image_prompt(engine, g["image_prompts"][1]);
  ASSERT_NE(a.pos.rope_delta, b.pos.rope_delta);
  const size_t vocab = size_t(m.config().vocab_size), steps = a.expected.size();
  Session sa(engine), sb(engine);
  auto prefill = [](Session& s, const ImagePrompt& ip) {
    s.reset();
    return argmax(s.eval_multimodal(ip.rows.data(), int64_t(ip.ids.size()), ip.pos.thw.data(),
                                    ip.deepstack.data()));
  };
  std::vector<int32_t> ta = {prefill(sa, a)}, tb = {prefill(sb, b)};
  std::vector<float> logits(2 * vocab);
  Session* seqs[] = {&sa, &sb};
  while (ta.size() < steps) {
    const int32_t toks[] = {ta.back(), tb.back()};
    engine.decode_batch(seqs, toks, logits.data());
    ta.push_back(argmax(std::span(logits.data(), vocab)));
    tb.push_back(argmax(std::span(logits.data() + vocab, vocab)));
  }
  EXPECT_EQ(ta, a.expected);
  EXPECT_EQ(tb, b.expected);

  // Verification of the reference's continuation: row i's argmax is token i + 1.
  for (VerifyPath path : {VerifyPath::Batch, VerifyPath::Prefill}) {
    Session s(engine);
    ASSERT_EQ(prefill(s, a), a.expected[0]);
    std::vector<float> vl((steps - 1) * vocab);
    engine.verify(s, std::span(a.expected).first(steps - 1), vl.data(), path);
    for (size_t i = 0; i + 1 < steps; ++i)
      EXPECT_EQ(argmax(std::span(vl.data() + i * vocab, vocab)), a.expected[i + 1])
          << "row " << i << (path == VerifyPath::Batch ? " batch" : " prefill");
    // Rolled back to the prompt plus 4 tokens, then on one step at a time (positions continue
    // at the cache position + rope_delta); a copy of the prefix does the same.
    const int32_t keep = int32_t(a.ids.size()) + 4;
    s.truncate(keep);
    Session c(engine);
    c.copy_prefix_from(s, keep);
    for (Session* x : {&s, &c}) {
      EXPECT_EQ(x->rope_delta(), a.pos.rope_delta);
      std::vector<int32_t> got(a.expected.begin(), a.expected.begin() + 5);
      while (got.size() < steps) got.push_back(argmax(x->eval_tokens(std::span(&got.back(), 1))));
      EXPECT_EQ(got, a.expected);
    }
    s.truncate(int32_t(a.ids.size()) - 1);  // into the prompt: the image's shift is kept
    EXPECT_EQ(s.rope_delta(), a.pos.rope_delta);
    s.truncate(3);  // before the image: text again
    EXPECT_EQ(s.rope_delta(), 0);
  }
}

// The whole chain from the image: decode (photos from ../shared/data, skipped when absent; the
// procedural odd size always), the processor, the vision tower, the image prompt with the
// tower's rows and DeepStack features, greedy ids equal to the reference's.
TEST(GoldenQwen3Vl, ImagePromptGreedyFromTheImage) {
  const auto g = read_json("golden.json");
  const Model& m = test::compiled_model(kDir, "f32");
  Engine engine(m, EngineOptions{2});
  const vision::QwenVlPreprocessConfig cfg = vision::parse_qwen_vl_preprocessor(
      nlohmann::json::parse(read_text_file(kDir / "preprocessor_config.json")), "fixture");
  const int32_t image_token = read_json("config.json")["image_token_id"];
  const size_t d = size_t(m.config().hidden);
  int ran = 0;
  for (const auto& p : g["image_prompts"]) {
    const std::string name = p["image"];
    SCOPED_TRACE(name);
    std::string src;
    for (const auto& e : g["images"])
      if (e["name"] == name) src = e["source"];
    vision::Image img;
    if (src.starts_with("procedural:")) {
      int w = 0, h = 0;
      ASSERT_EQ(std::sscanf(src.c_str() + 11, "%dx%d", &w, &h), 2);
      img = vision::test::procedural(w, h);
    } else {
      const auto dir = test::shared_data("images");
      if (dir.empty()) continue;
      img = vision::decode_image_file(dir.parent_path() / src.substr(7));
    }
    const vision::QwenVlPixels px = vision::preprocess_qwen_vl(img, cfg);
    ASSERT_EQ(px.grid_h, p["grid_thw"][1].get<int32_t>());
    ASSERT_EQ(px.grid_w, p["grid_thw"][2].get<int32_t>());
    const size_t tokens = size_t(px.patches() / 4);
    std::vector<float> feats(tokens * d), ds(2 * tokens * d);
    engine.encode_qwen_image(px.values.data(), px.grid_h, px.grid_w, feats.data(), ds.data());

    const std::vector<int32_t> ids = p["prompt_ids"], expected = p["tokens"];
    const size_t n = ids.size();
    const MergedGrid grid{px.grid_h / 2, px.grid_w / 2};
    const RopePositions pos = mrope_positions(ids, image_token, std::span(&grid, 1));
    std::vector<float> rows(n * d), deepstack(2 * n * d, 0.f);
    engine.embed(ids, rows.data());
    size_t j = 0;
    for (size_t i = 0; i < n; ++i) {
      if (ids[i] != image_token) continue;
      std::copy_n(feats.begin() + long(j * d), d, rows.begin() + long(i * d));
      for (size_t k = 0; k < 2; ++k)
        std::copy_n(ds.begin() + long((k * tokens + j) * d), d,
                    deepstack.begin() + long((k * n + i) * d));
      ++j;
    }
    ASSERT_EQ(j, tokens);
    Session s(engine);
    std::vector<int32_t> got = {
        argmax(s.eval_multimodal(rows.data(), int64_t(n), pos.thw.data(), deepstack.data()))};
    while (got.size() < expected.size())
      got.push_back(argmax(s.eval_tokens(std::span(&got.back(), 1))));
    EXPECT_EQ(got, expected);
    ++ran;
  }
  EXPECT_GE(ran, 1);
}

// `edgevl run -m X.evb -i image`: the chat template, the processor, the tower and the LLM from
// the command line, greedy ids equal to the reference's (the procedural odd size always, the
// photos when ../shared/data is there).
TEST(GoldenQwen3Vl, CliRunWithImageMatchesReference) {
  const auto g = read_json("golden.json");
  const auto evb = test::compiled_path(kDir, "f32");
  test::compiled_model(kDir, "f32");  // compiles it
  TempDir tmp;
  int ran = 0;
  for (const auto& p : g["image_prompts"]) {
    const std::string name = p["image"];
    SCOPED_TRACE(name);
    std::string src;
    for (const auto& e : g["images"])
      if (e["name"] == name) src = e["source"];
    std::filesystem::path file;
    if (src.starts_with("procedural:")) {
      int w = 0, h = 0;
      ASSERT_EQ(std::sscanf(src.c_str() + 11, "%dx%d", &w, &h), 2);
      file = tmp.path() / (name + ".bmp");
      vision::test::write_bmp(file, vision::test::procedural(w, h));
    } else {
      const auto dir = test::shared_data("images");
      if (dir.empty()) continue;
      file = dir.parent_path() / src.substr(7);
    }
    test::expect_cli_image_run(evb, file, "What is this?", "", p);
    ++ran;
  }
  EXPECT_GE(ran, 1);
}

}  // namespace
}  // namespace edgevl
