// Qwen3-VL's LLM on image prompts against transformers (tests/fixtures/golden/qwen3vl, made by
// tools/golden/make_qwen3vl_goldens.py): the chat-template prompt with its image tokens, the
// image rows and DeepStack features taken from the reference's vision tower outputs (the
// golden files), 3D MRoPE positions from runtime/execution/rope_positions.h, DeepStack added
// after the first decoder layers, then greedy decoding at cache position + rope_delta.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "core/mapped_file.h"
#include "core/npy.h"
#include "runtime/execution/rope_positions.h"
#include "runtime/execution/session.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

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

// The image prompts' logits at every position and greedy tokens (16 per prompt), with the
// reference's vision outputs; f32 to 1e-4 of the largest logit, as the text goldens.
TEST(GoldenQwen3Vl, ImagePromptGreedyWithReferenceVisionFeatures) {
  const auto g = read_json("golden.json");
  const int32_t image_token = read_json("config.json")["image_token_id"];
  const Model& m = test::compiled_model(kDir, "f32");
  Session s(m, SessionOptions{2, 0});
  const int32_t n_ds = s.engine().deepstack_layers();
  ASSERT_EQ(n_ds, 2);  // deepstack_visual_indexes [0, 2]
  const size_t d = size_t(m.config().hidden);
  for (const auto& p : g["image_prompts"]) {
    const std::string image = p["image"];
    SCOPED_TRACE(image);
    const std::vector<int32_t> ids = p["prompt_ids"];
    const std::vector<int32_t> expected = p["tokens"];
    const size_t n = ids.size();
    const MergedGrid grid{p["grid_thw"][1].get<int32_t>() / 2, p["grid_thw"][2].get<int32_t>() / 2};
    const RopePositions pos = mrope_positions(ids, image_token, std::span(&grid, 1));

    std::vector<float> rows(n * d), deepstack(size_t(n_ds) * n * d, 0.f);
    s.engine().embed(ids, rows.data());
    const NpyArray vis = read_npy(kDir / ("vision_" + image + ".npy"));
    std::vector<NpyArray> ds;
    for (int32_t k = 0; k < n_ds; ++k)
      ds.push_back(read_npy(kDir / ("deepstack_" + std::to_string(k) + "_" + image + ".npy")));
    size_t j = 0;  // image row
    for (size_t i = 0; i < n; ++i) {
      if (ids[i] != image_token) continue;
      ASSERT_LT((j + 1) * d, vis.data.size() + 1);
      std::copy_n(vis.data.begin() + long(j * d), d, rows.begin() + long(i * d));
      for (int32_t k = 0; k < n_ds; ++k)
        std::copy_n(ds[size_t(k)].data.begin() + long(j * d), d,
                    deepstack.begin() + long((size_t(k) * n + i) * d));
      ++j;
    }
    ASSERT_EQ(j * d, vis.data.size());

    s.reset();
    s.set_all_logits(true);
    std::span<const float> logits =
        s.eval_multimodal(rows.data(), int64_t(n), pos.thw.data(), deepstack.data());
    s.set_all_logits(false);
    EXPECT_EQ(s.rope_delta(), pos.rope_delta);
    const NpyArray ref = read_npy(kDir / p["logits"].get<std::string>());
    ASSERT_EQ(ref.data.size(), s.all_logits().size());
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < ref.data.size(); ++i) {
      max_ref = std::max(max_ref, double(std::fabs(ref.data[i])));
      max_diff = std::max(max_diff, double(std::fabs(s.all_logits()[i] - ref.data[i])));
    }
    EXPECT_LE(max_diff / max_ref, 1e-4) << "max|diff| " << max_diff << " max|ref| " << max_ref;
    std::printf("[ golden   ] qwen3vl %s: max|diff|/max|ref| = %.3g\n", image.c_str(),
                max_diff / max_ref);
    std::vector<int32_t> got;
    for (size_t t = 0; t < expected.size(); ++t) {
      const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      got.push_back(next);
      logits = s.eval_tokens(std::span(&next, 1));
    }
    EXPECT_EQ(got, expected);
  }
}

}  // namespace
}  // namespace edgevl
