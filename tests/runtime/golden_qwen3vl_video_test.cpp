// Qwen3-VL on a video against transformers (tests/fixtures/golden/qwen3vl/video.json, made by
// tools/golden/make_qwen3vl_video_goldens.py from tests/fixtures/video/gradient_88x60_6fps.mp4):
// the vision tower over the temporal groups (attention per group, as transformers' cu_seqlens),
// the 3D positions of a prompt whose video is one run of <|video_pad|> per group with the
// timestamp text between (get_rope_index), and the greedy ids of the whole chain from the file;
// and the same for Qwen3.5 (tests/fixtures/golden/qwen35vl).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/npy.h"
#include "core/temp_dir.h"
#include "runtime/chat/conversation.h"
#include "runtime/execution/engine.h"
#include "runtime/execution/rope_positions.h"
#include "runtime/execution/session.h"
#include "runtime/execution/vision_encoder.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"
#include "support/test_util.h"
#include "vision/qwen_vl_video.h"
#include "vision/video.h"

namespace edgevl {
namespace {

const std::filesystem::path kDir = test::fixtures_dir() / "golden" / "qwen3vl";
const std::filesystem::path kClip = test::fixtures_dir() / "video" / "gradient_88x60_6fps.mp4";

nlohmann::json read_json(const std::string& name) {
  return nlohmann::json::parse(read_text_file(kDir / name));
}

std::vector<MergedGrid> group_grids(const nlohmann::json& v) {
  const int32_t t = v["grid_thw"][0], h = v["grid_thw"][1], w = v["grid_thw"][2];
  return std::vector<MergedGrid>(size_t(t), MergedGrid{h / 2, w / 2});
}

double rel_diff(std::span<const float> a, std::span<const float> b) {
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    max_ref = std::max(max_ref, double(std::fabs(b[i])));
    max_diff = std::max(max_diff, double(std::fabs(a[i] - b[i])));
  }
  return max_diff / max_ref;
}

int32_t argmax(std::span<const float> v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST(GoldenQwen3VlVideo, PositionsMatchGetRopeIndex) {
  const auto v = read_json("video.json");
  const auto cfg = read_json("config.json");
  const int32_t image_token = cfg["image_token_id"], video_token = cfg["video_token_id"];
  const std::vector<int32_t> ids = v["prompt_ids"];
  const auto grids = group_grids(v);
  const RopePositions r = mrope_positions(ids, image_token, grids, video_token);
  const std::vector<std::vector<int32_t>> want = v["positions_thw"];  // [axis][token]
  for (size_t i = 0; i < ids.size(); ++i)
    for (size_t a = 0; a < 3; ++a) ASSERT_EQ(r.thw[3 * i + a], want[a][i]) << i << " axis " << a;
  EXPECT_EQ(r.rope_delta, v["rope_delta"].get<int32_t>());
  // Video tokens without video_token given are text; a grid short of a group is refused.
  EXPECT_THROW(mrope_positions(ids, image_token, grids), Error);
  EXPECT_THROW(
      mrope_positions(ids, image_token, std::span(grids).first(grids.size() - 1), video_token),
      Error);
}

// The tower on the reference's pixel_values_videos: the merger's rows and each DeepStack
// feature's, over all temporal groups.
TEST(GoldenQwen3VlVideo, VisionTowerOverVideoMatchesReference) {
  const auto v = read_json("video.json");
  const Model& m = test::compiled_model(kDir, "f32");
  Engine engine(m, EngineOptions{2});
  const int32_t gt = v["grid_thw"][0], gh = v["grid_thw"][1], gw = v["grid_thw"][2];
  ASSERT_GT(gt, 1);
  const NpyArray px = read_npy(kDir / v["pixels"].get<std::string>());
  const size_t d = size_t(m.config().hidden), tokens = size_t(gt * gh * gw / 4);
  std::vector<float> out(tokens * d), ds(2 * tokens * d);
  engine.encode_qwen_video(px.data.data(), gt, gh, gw, out.data(), ds.data());
  const NpyArray ref = read_npy(kDir / v["vision"].get<std::string>());
  ASSERT_EQ(ref.data.size(), out.size());
  const double worst = rel_diff(out, ref.data);
  double worst_ds = 0;
  for (size_t k = 0; k < 2; ++k) {
    const NpyArray r = read_npy(kDir / v["deepstack"][k].get<std::string>());
    ASSERT_EQ(r.data.size(), tokens * d);
    worst_ds =
        std::max(worst_ds, rel_diff(std::span(ds).subspan(k * tokens * d, tokens * d), r.data));
  }
  std::printf("[ golden   ] qwen3vl video tower (%dx%dx%d): merger %.3g, DeepStack %.3g\n", gt, gh,
              gw, worst, worst_ds);
  EXPECT_LE(worst, 1e-5);
  EXPECT_LE(worst_ds, 1e-5);
  // One tower run over all groups at once (attention across frames) is not what the
  // reference computes: the first group alone gives its rows, not a blend.
  std::vector<float> first(tokens / size_t(gt) * d);
  engine.encode_qwen_image(px.data.data(), gh, gw, first.data());
  EXPECT_LE(rel_diff(first, std::span(ref.data).first(first.size())), 1e-5);
}

// The whole chain from the file: decode, sampling, the video processor, the tower, the prompt's
// rows with the video's features and DeepStack rows at the <|video_pad|> runs, 3D positions,
// greedy ids equal to the reference's.
TEST(GoldenQwen3VlVideo, GreedyFromTheClip) {
  if (!vision::video_supported()) GTEST_SKIP() << "built without FFmpeg's libraries";
  const auto v = read_json("video.json");
  const auto cfg = read_json("config.json");
  const int32_t image_token = cfg["image_token_id"], video_token = cfg["video_token_id"];
  const Model& m = test::compiled_model(kDir, "f32");
  Engine engine(m, EngineOptions{2});
  const auto vcfg = vision::parse_qwen_vl_video_preprocessor(
      read_json("video_preprocessor_config.json"), "video_preprocessor_config.json");
  const vision::QwenVlVideoPixels px =
      vision::preprocess_qwen_vl_video(vision::decode_video_file(kClip, vcfg.sampling), vcfg);
  ASSERT_EQ(std::vector<int>({px.grid_t, px.grid_h, px.grid_w}),
            v["grid_thw"].get<std::vector<int>>());
  // The prompt's timestamp texts are ours.
  const std::string text = v["text"];
  for (double ts : px.timestamps)
    EXPECT_NE(text.find(vision::video_timestamp_text(ts) + "<|vision_start|>"), std::string::npos);
  const size_t d = size_t(m.config().hidden),
               tokens = size_t(px.grid_t) * size_t(px.frame_patches()) / 4;
  std::vector<float> feats(tokens * d), ds(2 * tokens * d);
  engine.encode_qwen_video(px.values.data(), px.grid_t, px.grid_h, px.grid_w, feats.data(),
                           ds.data());

  const std::vector<int32_t> ids = v["prompt_ids"], expected = v["tokens"];
  const size_t n = ids.size();
  const RopePositions pos = mrope_positions(ids, image_token, group_grids(v), video_token);
  std::vector<float> rows(n * d), deepstack(2 * n * d, 0.f);
  engine.embed(ids, rows.data());
  size_t j = 0;
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] != video_token) continue;
    ASSERT_LT(j, tokens);
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
  EXPECT_EQ(s.rope_delta(), v["rope_delta"].get<int32_t>());
  while (got.size() < expected.size())
    got.push_back(argmax(s.eval_tokens(std::span(&got.back(), 1))));
  EXPECT_EQ(got, expected);
}

// The conversation path (chat, serve, the C API and run go through it): a user message with
// the video renders to the reference's prompt ids (the template's video part before the text,
// the processor's timestamps and groups), at a <video> placeholder too; an <image> placeholder
// for a video is refused.
TEST(GoldenQwen3VlVideo, ConversationPromptEqualsReference) {
  if (!vision::video_supported()) GTEST_SKIP() << "built without FFmpeg's libraries";
  const auto v = read_json("video.json");
  const Model& m = test::compiled_model(kDir, "f32");
  Engine engine(m, EngineOptions{2});
  VisionEncoder enc(engine);
  const ImageRef video = enc.prepare_video_file(kClip);
  ASSERT_TRUE(video->is_video());
  EXPECT_EQ(video->groups, v["grid_thw"][0].get<int32_t>());
  const std::string q = v["question"];
  const std::vector<int32_t> want = v["prompt_ids"];
  EXPECT_EQ(build_chat_prompt(m, {Message{"user", q, {video}}}).ids, want);
  const Prompt p = build_chat_prompt(m, {Message{"user", "<video>" + q, {video}}});
  EXPECT_EQ(p.ids, want);
  ASSERT_EQ(p.images.size(), size_t(video->groups));  // one run per group
  EXPECT_EQ(p.images[1].offset, p.images[1].count);
  EXPECT_THROW(build_chat_prompt(m, {Message{"user", "<image>" + q, {video}}}), Error);
  // The rows the conversation evaluates: the features of each group at its run, the 3D
  // positions of the reference.
  const PromptRows rows = prompt_rows(engine, &enc, p);
  const std::vector<std::vector<int32_t>> pos = v["positions_thw"];
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t a = 0; a < 3; ++a) ASSERT_EQ(rows.mm.rope_thw[3 * i + a], pos[a][i]) << i;
}

// `edgevl run -m X.evb -v clip.mp4`: greedy ids and prompt length equal to the reference's.
TEST(GoldenQwen3VlVideo, CliRunWithVideoMatchesReference) {
  if (!vision::video_supported()) GTEST_SKIP() << "built without FFmpeg's libraries";
  const auto v = read_json("video.json");
  const auto evb = test::compiled_path(kDir, "f32");
  test::compiled_model(kDir, "f32");  // compiles it
  const auto r = test::run_cli(
      "run -m " + test::shell_quote(evb) + " -v " + test::shell_quote(kClip) + " -p " +
      test::shell_quote(v["question"].get<std::string>()) + " -n 16 --temp 0 --ignore-eos --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), v["tokens"].get<std::vector<int32_t>>());
  EXPECT_EQ(j["prompt_tokens"], v["prompt_ids"].size());
  EXPECT_EQ(j["images"], 1);
  TempDir tmp;
  // --dump: the video's pixels once (its groups one after another), as the processor made
  // them (within one u8 step), one DeepStack file for the one video.
  const auto dump = test::run_cli("run -m " + test::shell_quote(evb) + " -v " +
                                  test::shell_quote(kClip) + " -p hi -n 1 --dump " +
                                  test::shell_quote(tmp.path() / "d") + " --dump-filter none");
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  const NpyArray px = read_npy(tmp.path() / "d" / "pixel_values.npy");
  const NpyArray ref = read_npy(kDir / v["pixels"].get<std::string>());
  ASSERT_EQ(px.shape, ref.shape);
  float worst = 0;
  for (size_t i = 0; i < px.data.size(); ++i)
    worst = std::max(worst, std::fabs(px.data[i] - ref.data[i]));
  EXPECT_LE(worst, 1.0001f / 127.5f);
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "d" / "deepstack_embeds_0.npy"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "d" / "deepstack_embeds_1.npy"));
  // A file that is not a video: one error naming it.
  const auto bad = tmp.path() / "not_a_video.mp4";
  std::ofstream(bad) << std::string(1000, 'x');
  const auto e = test::run_cli("run -m " + test::shell_quote(evb) + " -v " +
                               test::shell_quote(bad) + " -p hi -n 1");
  EXPECT_NE(e.exit_code, 0);
  EXPECT_NE(e.err.find("not_a_video.mp4"), std::string::npos) << e.err;
}

// Qwen3.5 (tests/fixtures/golden/qwen35vl: its own tower, no DeepStack, the reply opening
// with <think>\n) on the same clip through the same code: positions, the tower over the
// groups, and `run -v` greedy ids against transformers' Qwen3_5ForConditionalGeneration.
TEST(GoldenQwen35Video, PositionsTowerAndRunMatchReference) {
  const std::filesystem::path dir = test::fixtures_dir() / "golden" / "qwen35vl";
  const auto v = nlohmann::json::parse(read_text_file(dir / "video.json"));
  const auto cfg = nlohmann::json::parse(read_text_file(dir / "config.json"));
  const std::vector<int32_t> ids = v["prompt_ids"];
  const RopePositions r =
      mrope_positions(ids, cfg["image_token_id"], group_grids(v), cfg["video_token_id"]);
  const std::vector<std::vector<int32_t>> want = v["positions_thw"];
  for (size_t i = 0; i < ids.size(); ++i)
    for (size_t a = 0; a < 3; ++a) ASSERT_EQ(r.thw[3 * i + a], want[a][i]) << i << " axis " << a;
  EXPECT_EQ(r.rope_delta, v["rope_delta"].get<int32_t>());

  const Model& m = test::compiled_model(dir, "f32");
  Engine engine(m, EngineOptions{2});
  ASSERT_EQ(engine.deepstack_layers(), 0);
  const int32_t gt = v["grid_thw"][0], gh = v["grid_thw"][1], gw = v["grid_thw"][2];
  const NpyArray px = read_npy(dir / v["pixels"].get<std::string>());
  std::vector<float> out(size_t(gt * gh * gw / 4) * size_t(m.config().hidden));
  engine.encode_qwen_video(px.data.data(), gt, gh, gw, out.data());
  const NpyArray ref = read_npy(dir / v["vision"].get<std::string>());
  ASSERT_EQ(ref.data.size(), out.size());
  const double worst = rel_diff(out, ref.data);
  std::printf("[ golden   ] qwen3.5 video tower (%dx%dx%d): %.3g\n", gt, gh, gw, worst);
  EXPECT_LE(worst, 1e-5);

  if (!vision::video_supported()) GTEST_SKIP() << "built without FFmpeg's libraries";
  const auto evb = test::compiled_path(dir, "f32");
  const auto run = test::run_cli(
      "run -m " + test::shell_quote(evb) + " -v " + test::shell_quote(kClip) + " -p " +
      test::shell_quote(v["question"].get<std::string>()) + " -n 16 --temp 0 --ignore-eos --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), v["tokens"].get<std::vector<int32_t>>());
  EXPECT_EQ(j["prompt_tokens"], ids.size());
}

}  // namespace
}  // namespace edgevl
