// Video decoding, frame sampling and Qwen3-VL video preprocessing (src/vision/video.h,
// src/vision/qwen_vl_video.h) against transformers: sample_frames and the video smart_resize
// on cases computed by transformers, and on tests/fixtures/video/gradient_88x60_6fps.mp4 the
// frames PyAV decoded, the processor's pixel_values_videos, grid and timestamps
// (tests/fixtures/golden/qwen3vl/video.json, tools/golden/make_qwen3vl_video_goldens.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/npy.h"
#include "support/test_paths.h"
#include "vision/image.h"
#include "vision/qwen_vl_video.h"
#include "vision/video.h"

namespace edgevl::vision {
namespace {

const std::filesystem::path kGolden = edgevl::test::fixtures_dir() / "golden" / "qwen3vl";
const std::filesystem::path kClip =
    edgevl::test::fixtures_dir() / "video" / "gradient_88x60_6fps.mp4";

nlohmann::json golden() {
  return nlohmann::json::parse(read_text_file(kGolden / "video.json"));
}

QwenVlVideoConfig golden_config() {
  return parse_qwen_vl_video_preprocessor(
      nlohmann::json::parse(read_text_file(kGolden / "video_preprocessor_config.json")),
      "video_preprocessor_config.json");
}

TEST(QwenVlVideo, SampleFramesMatchesTransformers) {
  // From Qwen3VLVideoProcessor().sample_frames(VideoMetadata(total, fps)), class defaults.
  const VideoSampling s;
  EXPECT_EQ(sample_frame_indices(15, 6.0, s), (std::vector<int64_t>{0, 4, 7, 10, 14}));
  EXPECT_EQ(sample_frame_indices(7, 24.0, s), (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(sample_frame_indices(3, 30.0, s), (std::vector<int64_t>{0, 1, 2}));  // < min_frames
  EXPECT_EQ(sample_frame_indices(300, 30.0, s),
            (std::vector<int64_t>{0,   16,  31,  47,  63,  79,  94,  110, 126, 142,
                                  157, 173, 189, 205, 220, 236, 252, 268, 283, 299}));
  const auto long_clip = sample_frame_indices(10000, 29.97, s);
  ASSERT_EQ(long_clip.size(), 667u);
  EXPECT_EQ(std::accumulate(long_clip.begin(), long_clip.end(), int64_t{0}), 3334667);
  EXPECT_EQ(long_clip[36], 540);  // the step of 15.02: one gap of 16 here
  EXPECT_EQ(long_clip[37], 556);
  const auto capped = sample_frame_indices(100000, 25.0, s);  // max_frames
  ASSERT_EQ(capped.size(), 768u);
  EXPECT_EQ(std::accumulate(capped.begin(), capped.end(), int64_t{0}), 38399616);
  EXPECT_EQ(sample_frame_indices(100, 0.5, s).size(), 100u);  // every frame
  EXPECT_THROW(sample_frame_indices(0, 6.0, s), Error);
}

TEST(QwenVlVideo, SmartResizeMatchesTransformers) {
  struct Case {
    int t, h, w;
    int64_t min, max;
    int want_h, want_w;
  };
  // From transformers.models.qwen3_vl.video_processing_qwen3_vl.smart_resize (factor 32,
  // temporal 2).
  const Case cases[] = {
      {5, 60, 88, 8192, 65536, 64, 96},            // the golden clip: rounding only
      {4, 720, 1280, 131072, 786432, 320, 576},    // above the budget: floor
      {9, 20, 300, 4096, 1000000000, 32, 480},     // a side under the factor: scaled up
      {64, 1080, 1920, 4096, 25165824, 448, 832},  // published size, many frames
      {3, 48, 48, 131072, 786432, 224, 224},       // below the budget: ceil
  };
  for (const Case& c : cases) {
    const ResizedSize r = smart_resize_video(c.t, c.h, c.w, 2, 32, c.min, c.max);
    EXPECT_EQ(r.height, c.want_h) << c.t << " " << c.h << "x" << c.w;
    EXPECT_EQ(r.width, c.want_w) << c.t << " " << c.h << "x" << c.w;
  }
  EXPECT_THROW(smart_resize_video(1, 64, 64, 2, 32, 4096, 65536), Error);  // < one patch
  EXPECT_THROW(smart_resize_video(4, 32, 32 * 201, 2, 32, 4096, 1 << 30), Error);
}

TEST(QwenVlVideo, ConfigDefaultsAndRefusals) {
  const QwenVlVideoConfig d = parse_qwen_vl_video_preprocessor(nlohmann::json::object(), "x");
  EXPECT_EQ(d.pre.patch_size, 16);
  EXPECT_EQ(d.pre.min_pixels, 128 * 32 * 32);
  EXPECT_EQ(d.pre.max_pixels, 32 * 32 * 768);
  EXPECT_EQ(d.pre.mean[0], 0.5f);
  EXPECT_EQ(d.sampling.fps, 2.0);
  const QwenVlVideoConfig g = golden_config();
  EXPECT_EQ(g.pre.min_pixels, 8192);
  EXPECT_EQ(g.pre.max_pixels, 65536);
  EXPECT_EQ(g.sampling.min_frames, 4);
  EXPECT_EQ(g.sampling.max_frames, 768);
  EXPECT_THROW(parse_qwen_vl_video_preprocessor({{"num_frames", 8}}, "x"), Error);
  EXPECT_THROW(parse_qwen_vl_video_preprocessor({{"do_sample_frames", false}}, "x"), Error);
  EXPECT_THROW(parse_qwen_vl_video_preprocessor({{"fps", -1}}, "x"), Error);
  EXPECT_THROW(parse_qwen_vl_video_preprocessor({{"min_frames", 9}, {"max_frames", 4}}, "x"),
               Error);
}

TEST(QwenVlVideo, DecodesTheFramesPyAvDecodes) {
  if (!video_supported()) GTEST_SKIP() << "built without FFmpeg's libraries";
  const auto g = golden();
  const Video v = decode_video_file(kClip, golden_config().sampling);
  EXPECT_EQ(v.total_frames, g["total_frames"].get<int64_t>());
  EXPECT_EQ(v.fps, g["fps"].get<double>());
  EXPECT_EQ(v.indices, g["frame_indices"].get<std::vector<int64_t>>());
  const NpyArray want =
      read_npy(kGolden / g["frames"].get<std::string>());  // u8 values, [n][h][w][3]
  ASSERT_EQ(want.shape, (std::vector<int64_t>{int64_t(v.frames.size()), v.height, v.width, 3}));
  size_t off = 0, differ = 0;
  int worst = 0;
  for (const Image& f : v.frames)
    for (uint8_t b : f.rgb) {
      const int d = std::abs(int(b) - int(want.data[off++]));
      worst = std::max(worst, d);
      differ += d != 0;
    }
  EXPECT_EQ(worst, 0) << differ << " of " << off << " values differ";
}

TEST(QwenVlVideo, PixelsMatchTheVideoProcessor) {
  if (!video_supported()) GTEST_SKIP() << "built without FFmpeg's libraries";
  const auto g = golden();
  const QwenVlVideoConfig cfg = golden_config();
  const QwenVlVideoPixels px =
      preprocess_qwen_vl_video(decode_video_file(kClip, cfg.sampling), cfg);
  EXPECT_EQ(std::vector<int>({px.grid_t, px.grid_h, px.grid_w}),
            g["grid_thw"].get<std::vector<int>>());
  EXPECT_EQ(px.timestamps, g["timestamps"].get<std::vector<double>>());
  const NpyArray want = read_npy(kGolden / g["pixels"].get<std::string>());
  ASSERT_EQ(want.data.size(), px.values.size());
  // torchvision resizes in float and rounds, Pillow in fixed point: one u8 step at most
  // (1 / 127.5 after normalising by 0.5), on a few values.
  const float step = 1.f / 127.5f;
  size_t differ = 0;
  float worst = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    const float d = std::fabs(px.values[i] - want.data[i]);
    worst = std::max(worst, d);
    differ += d != 0.f;
  }
  EXPECT_LE(worst, step * 1.0001f);
  EXPECT_LT(double(differ), 0.01 * double(want.data.size())) << differ << " values differ";
  RecordProperty("differing_values", int(differ));
}

TEST(QwenVlVideo, TimestampText) {
  EXPECT_EQ(video_timestamp_text(0.3333333333333333), "<0.3 seconds>");
  EXPECT_EQ(video_timestamp_text(1.4166666666666667), "<1.4 seconds>");
  EXPECT_EQ(video_timestamp_text(0.25), "<0.2 seconds>");  // Python: half to even on the double
  EXPECT_EQ(video_timestamp_text(12.0), "<12.0 seconds>");
}

TEST(QwenVlVideo, BadFilesAreOneClearError) {
  if (!video_supported()) {
    EXPECT_THROW(decode_video_file(kClip, {}), Error);
    GTEST_SKIP() << "built without FFmpeg's libraries (refusal checked)";
  }
  const std::string bytes = read_text_file(kClip);
  const std::span<const uint8_t> all(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto message = [&](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  // The same frames from memory as from the file.
  EXPECT_EQ(decode_video_memory(all, "clip", {}).frames.size(),
            decode_video_file(kClip, {}).frames.size());
  EXPECT_NE(
      message([&] { decode_video_file("/nonexistent/x.mp4", {}); }).find("/nonexistent/x.mp4"),
      std::string::npos);
  EXPECT_NE(message([&] { decode_video_memory({}, "empty.mp4", {}); }).find("empty.mp4"),
            std::string::npos);
  const std::string junk(4096, 'x');
  EXPECT_NE(message([&] {
              decode_video_memory({reinterpret_cast<const uint8_t*>(junk.data()), junk.size()},
                                  "junk.mp4", {});
            }).find("junk.mp4"),
            std::string::npos);
  // Cut in half: the moov atom (at the end) or frames are missing.
  EXPECT_NE(message([&] {
              decode_video_memory(all.first(all.size() / 2), "half.mp4", {});
            }).find("half.mp4"),
            std::string::npos);
  VideoLimits small;
  small.max_pixels = 88 * 60 - 1;
  EXPECT_NE(message([&] { decode_video_file(kClip, {}, small); }).find("limit"), std::string::npos);
  small = {};
  small.max_frames = 14;
  EXPECT_NE(message([&] { decode_video_file(kClip, {}, small); }).find("limit"), std::string::npos);
}

}  // namespace
}  // namespace edgevl::vision
