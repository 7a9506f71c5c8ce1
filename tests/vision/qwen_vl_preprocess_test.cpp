// Qwen-VL preprocessing (src/vision/qwen_vl_preprocess.h) against transformers'
// Qwen2VLImageProcessorPil: smart_resize sizes computed by transformers, and the pixel_values
// of tests/fixtures/golden/qwen3vl (tools/golden/make_qwen3vl_goldens.py) for procedural odd
// sizes (in the repository) and real photos (../shared/data, skipped when absent).
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/npy.h"
#include "format/json_fields.h"
#include "vision/image_jpeg.h"
#include "vision/qwen_vl_preprocess.h"
#include "vision/vision_test_util.h"

namespace edgevl::vision::test {
namespace {

const std::filesystem::path golden_dir() {
  return edgevl::test::fixtures_dir() / "golden" / "qwen3vl";
}

TEST(QwenVlPreprocess, SmartResizeMatchesTransformers) {
  struct Case {
    int h, w, factor;
    int64_t min, max;
    int want_h, want_w;
  };
  // From transformers.models.qwen2_vl.image_processing_pil_qwen2_vl.smart_resize.
  const Case cases[] = {
      {80, 144, 32, 4096, 16384, 64, 128},         // 2.5 and 4.5 blocks round to even: down
      {112, 176, 32, 1024, 1000000000, 128, 192},  // 3.5 and 5.5: up (to even)
      {45, 70, 32, 4096, 16384, 64, 96},           // below min_pixels: ceil
      {747, 1000, 32, 4096, 16384, 96, 128},       // above max_pixels: floor
      {448, 448, 32, 65536, 16777216, 448, 448},
      {896, 1344, 32, 65536, 16777216, 896, 1344},
      {1200, 1920, 32, 65536, 16777216, 1216, 1920},
      {48, 48, 32, 65536, 16777216, 256, 256},
      {16, 3000, 32, 65536, 16777216, 32, 3520},
      {3000, 4000, 32, 65536, 1003520, 864, 1152},
      {1, 200, 32, 65536, 16777216, 32, 3648},
  };
  for (const Case& c : cases) {
    const ResizedSize s = smart_resize(c.h, c.w, c.factor, c.min, c.max);
    EXPECT_EQ(s.height, c.want_h) << c.h << "x" << c.w;
    EXPECT_EQ(s.width, c.want_w) << c.h << "x" << c.w;
  }
  EXPECT_THROW(smart_resize(1, 201, 32, 65536, 16777216), Error);  // aspect ratio > 200
}

TEST(QwenVlPreprocess, ReadsPreprocessorConfig) {
  const QwenVlPreprocessConfig c = parse_qwen_vl_preprocessor(
      read_json_file(golden_dir() / "preprocessor_config.json"), "fixture");
  EXPECT_EQ(c.patch_size, 16);
  EXPECT_EQ(c.merge_size, 2);
  EXPECT_EQ(c.temporal_patch_size, 2);
  EXPECT_EQ(c.min_pixels, 4096);
  EXPECT_EQ(c.max_pixels, 16384);
  EXPECT_EQ(c.mean[1], 0.5f);
  EXPECT_EQ(c.std[2], 0.5f);
  // The older spelling wins over size, as the processor's constructor does.
  nlohmann::json j = {{"min_pixels", 1000}, {"max_pixels", 2000}, {"size", {{"shortest_edge", 5}}}};
  const QwenVlPreprocessConfig o = parse_qwen_vl_preprocessor(j, "old");
  EXPECT_EQ(o.min_pixels, 1000);
  EXPECT_EQ(o.max_pixels, 2000);
  EXPECT_EQ(o.patch_size, 14);              // the class default
  EXPECT_FLOAT_EQ(o.mean[0], 0.48145466f);  // CLIP's, the class default
  EXPECT_THROW(parse_qwen_vl_preprocessor({{"resample", 2}}, "x"), Error);
  EXPECT_THROW(parse_qwen_vl_preprocessor({{"do_normalize", false}}, "x"), Error);
  EXPECT_THROW(parse_qwen_vl_preprocessor({{"image_std", {0.5, 0, 0.5}}}, "x"), Error);
}

// Every golden image: the grid, and pixel_values bit for bit (JPEGs within the stb fallback's
// decode differences when libjpeg-turbo is absent).
TEST(QwenVlPreprocess, PixelValuesMatchTransformers) {
  const nlohmann::json g = nlohmann::json::parse(read_text_file(golden_dir() / "golden.json"));
  const QwenVlPreprocessConfig cfg = parse_qwen_vl_preprocessor(
      read_json_file(golden_dir() / "preprocessor_config.json"), "fixture");
  int checked = 0, skipped = 0;
  for (const auto& e : g["images"]) {
    const std::string src = e["source"], name = e["name"];
    SCOPED_TRACE(name);
    Image img;
    bool exact = true;
    if (src.starts_with("procedural:")) {
      int w = 0, h = 0;
      ASSERT_EQ(std::sscanf(src.c_str() + 11, "%dx%d", &w, &h), 2) << src;
      img = procedural(w, h);
    } else {
      ASSERT_TRUE(src.starts_with("shared:")) << src;
      const auto dir = edgevl::test::shared_data("images");
      if (dir.empty()) {
        ++skipped;
        continue;
      }
      img = decode_image_file(dir.parent_path() / src.substr(7));
      exact = detail::have_libjpeg();
    }
    ASSERT_EQ(img.height, e["input_size"][0].get<int>());
    ASSERT_EQ(img.width, e["input_size"][1].get<int>());
    const QwenVlPixels px = preprocess_qwen_vl(img, cfg);
    EXPECT_EQ(px.grid_h, e["grid_thw"][1].get<int>());
    EXPECT_EQ(px.grid_w, e["grid_thw"][2].get<int>());
    const NpyArray ref = read_npy(golden_dir() / e["pixels"].get<std::string>());
    ASSERT_EQ(ref.shape, (std::vector<int64_t>{px.patches(), cfg.row_values()}));
    ASSERT_EQ(ref.data.size(), px.values.size());
    size_t differ = 0;
    float worst = 0;
    for (size_t i = 0; i < ref.data.size(); ++i) {
      differ += std::memcmp(&ref.data[i], &px.values[i], 4) != 0;
      worst = std::max(worst, std::fabs(ref.data[i] - px.values[i]));
    }
    if (exact)
      EXPECT_EQ(differ, 0u) << "max |diff| " << worst;
    else  // stb's JPEG decode: a few levels on some pixels (preprocess_golden_test.cpp)
      EXPECT_LE(worst, 6 * 2.0f / 255.0f + 1e-6f);
    ++checked;
  }
  EXPECT_GE(checked, 2);
  if (skipped > 0)
    std::printf("[ skipped  ] %d photos: %s\n", skipped,
                edgevl::test::shared_data_missing("images").c_str());
}

}  // namespace
}  // namespace edgevl::vision::test
