// Checks src/vision against goldens made by Pillow + InternVL's reference preprocessing
// (tools/golden/make_image_goldens.py -> tests/fixtures/images/goldens.json).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "core/error.h"
#include "vision/image_jpeg.h"
#include "vision/preprocess.h"
#include "vision/vision_test_util.h"

namespace edgevl::vision::test {
namespace {

// With libjpeg-turbo (EDGEVL_HAVE_LIBJPEG) JPEG pixels are Pillow's exactly. The stb
// fallback's chroma upsampling and colour conversion round differently: measured max 3
// levels on every golden JPEG; resize and normalisation stay exact either way.
int jpeg_tolerance() {
  return detail::have_libjpeg() ? 0 : 6;
}

bool is_jpeg(const std::string& source) {
  return source.ends_with(".jpg") || source.ends_with(".jpeg");
}

// Decodes or generates the entry's source; empty image when it is absent (shared data).
Image load_source(const nlohmann::json& e) {
  const std::string src = e["source"];
  if (src.starts_with("fixture:")) return decode_image_file(images_dir() / src.substr(8));
  if (src.starts_with("procedural:")) {
    int w = 0, h = 0;
    EXPECT_EQ(std::sscanf(src.c_str() + 11, "%dx%d", &w, &h), 2) << src;
    return procedural(w, h);
  }
  if (src.starts_with("shared:")) {
    const auto dir = edgevl::test::shared_data("images");
    if (dir.empty()) return {};
    return decode_image_file(dir.parent_path() / src.substr(7));
  }
  ADD_FAILURE() << "unknown source " << src;
  return {};
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Runs one manifest entry; returns false when its source is absent.
bool check_entry(const nlohmann::json& e) {
  const std::string name = e["name"];
  SCOPED_TRACE(name);
  const Image img = load_source(e);
  if (img.width == 0) return false;
  const bool jpeg = is_jpeg(e["source"]);
  const int tol = jpeg ? jpeg_tolerance() : 1;
  const bool exact = !jpeg || detail::have_libjpeg();
  EXPECT_EQ(img.width, e["width"].get<int>());
  EXPECT_EQ(img.height, e["height"].get<int>());

  std::string decode_note = "-";
  if (e.contains("decoded_png")) {
    const Image gold = decode_image_file(images_dir() / e["decoded_png"].get<std::string>());
    const Diff d = diff(subsample(img, e["decoded_step"]), gold);
    EXPECT_LE(d.max, tol) << "decoded pixels differ from Pillow's";
    const bool same = crc32_hex(img.rgb) == e["decoded_crc32"].get<std::string>();
    decode_note = fmt::format("max {} mean {:.3f} crc {}", d.max, d.mean, same ? "==" : "!=");
  }

  PreprocessConfig cfg;
  cfg.max_tiles = e["max_num"];
  TileGrid grid;
  const std::vector<Image> tiles = preprocess_tiles_u8(img, cfg, &grid);
  EXPECT_EQ(grid.cols, e["cols"].get<int>());
  EXPECT_EQ(grid.rows, e["rows"].get<int>());
  EXPECT_EQ(static_cast<int>(tiles.size()), e["count"].get<int>());
  int crc_ok = 0;
  const auto& crcs = e["tile_crc32"];
  for (size_t i = 0; i < tiles.size() && i < crcs.size(); ++i)
    crc_ok += crc32_hex(tiles[i].rgb) == crcs[i].get<std::string>();
  if (exact) {
    EXPECT_EQ(crc_ok, static_cast<int>(crcs.size())) << "tile checksums differ";
  }
  const Image gold = decode_image_file(images_dir() / e["tiles_png"].get<std::string>());
  const Diff d = diff(subsample(vstack(tiles), e["tiles_step"]), gold);
  EXPECT_LE(d.max, tol) << "tile pixels differ from Pillow's";

  // Normalisation: every float must be bit-identical to numpy's float32 (v/255-mean)/std.
  const Tiles t = preprocess(img, cfg);
  EXPECT_EQ(t.count, static_cast<int>(tiles.size()));
  EXPECT_EQ(t.has_thumbnail, e["thumbnail"].get<bool>());
  const auto& lut = manifest()["normalize_lut_f32_bits"];
  const size_t plane = 448 * 448;
  size_t bad = 0;
  for (size_t i = 0; i < tiles.size() && t.pixels.size() == tiles.size() * 3 * plane; ++i)
    for (int c = 0; c < 3; ++c)
      for (size_t p = 0; p < plane; p += 3) {
        const uint32_t want = lut[c][tiles[i].rgb[p * 3 + c]].get<uint32_t>();
        bad += float_bits(t.pixels[(i * 3 + c) * plane + p]) != want;
      }
  EXPECT_EQ(bad, 0u) << "normalised floats differ from the float32 reference";

  std::printf(
      "  %-28s grid %dx%d tiles %2zu  tile crc %d/%zu  tile max|diff| %d (step %d)  "
      "decode: %s\n",
      name.c_str(), grid.cols, grid.rows, tiles.size(), crc_ok, crcs.size(), d.max,
      e["tiles_step"].get<int>(), decode_note.c_str());
  return true;
}

TEST(VisionGolden, JpegBackend) {
  std::printf("  JPEG decoder: %s\n",
              detail::have_libjpeg() ? "libjpeg-turbo (Pillow-exact)" : "stb_image (approx.)");
}

TEST(VisionGolden, GridsMatchReference) {
  const auto& grids = manifest()["grids"];
  ASSERT_GE(grids.size(), 30u);
  for (const auto& g : grids) {
    const TileGrid got = choose_grid(g["width"], g["height"], g["min_num"], g["max_num"]);
    EXPECT_EQ(got.cols, g["cols"].get<int>()) << g.dump();
    EXPECT_EQ(got.rows, g["rows"].get<int>()) << g.dump();
  }
}

TEST(VisionGolden, GridRejectsBadArguments) {
  EXPECT_THROW(choose_grid(0, 10, 1, 12), Error);
  EXPECT_THROW(choose_grid(10, 10, 0, 12), Error);
  EXPECT_THROW(choose_grid(10, 10, 5, 4), Error);
  EXPECT_THROW(choose_grid(10, 10, 1, kMaxTilesLimit + 1), Error);
  EXPECT_THROW(choose_grid(10, 10, 1, 12, 0), Error);
}

TEST(VisionGolden, ResizeMatchesPillow) {
  for (const auto& r : manifest()["resizes"]) {
    const Image src = procedural(r["src"][0], r["src"][1]);
    const Image out = resize_bicubic(src, r["dst"][0], r["dst"][1]);
    const bool same = crc32_hex(out.rgb) == r["crc32"].get<std::string>();
    std::string note = same ? "identical" : "DIFFERENT";
    if (r.contains("png")) {
      const Diff d = diff(out, decode_image_file(images_dir() / r["png"].get<std::string>()));
      EXPECT_LE(d.max, 1) << r.dump();
      note += fmt::format(" (max|diff| {})", d.max);
    }
    EXPECT_TRUE(same) << r.dump();
    std::printf("  resize %dx%d -> %dx%d: %s\n", src.width, src.height, out.width, out.height,
                note.c_str());
  }
}

TEST(VisionGolden, ResizeRejectsBadSizes) {
  const Image src = procedural(4, 4);
  EXPECT_THROW(resize_bicubic(src, 0, 4), Error);
  EXPECT_THROW(resize_bicubic(src, 4, -1), Error);
  EXPECT_THROW(resize_bicubic(Image{}, 4, 4), Error);
  EXPECT_THROW(resize_bicubic(src, 1 << 20, 1 << 20), Error);
}

TEST(VisionGolden, ResizeToSameSizeIsACopy) {
  const Image src = procedural(31, 17);
  EXPECT_EQ(resize_bicubic(src, 31, 17).rgb, src.rgb);
}

TEST(VisionGolden, PreprocessOptionsAndLayout) {
  // image_size 224, no thumbnail, min_tiles 2: a 600x300 image gives a 2x1 grid.
  PreprocessConfig cfg;
  cfg.image_size = 224;
  cfg.min_tiles = 2;
  cfg.max_tiles = 4;
  cfg.use_thumbnail = false;
  const Image img = procedural(600, 300);
  TileGrid grid;
  const auto u8 = preprocess_tiles_u8(img, cfg, &grid);
  const Tiles t = preprocess(img, cfg);
  EXPECT_EQ(grid.cols, 2);
  EXPECT_EQ(grid.rows, 1);
  ASSERT_EQ(t.count, 2);
  EXPECT_FALSE(t.has_thumbnail);
  const size_t plane = 224 * 224;
  ASSERT_EQ(t.pixels.size(), 2 * 3 * plane);
  // Tile 1 is the right half of the 448x224 resize; CHW layout per tile.
  const Image whole = resize_bicubic(img, 448, 224);
  const int x = 5, y = 7, c = 2;
  const uint8_t v = whole.rgb[(static_cast<size_t>(y) * 448 + 224 + x) * 3 + c];
  EXPECT_EQ(u8[1].rgb[(static_cast<size_t>(y) * 224 + x) * 3 + c], v);
  const float want = (static_cast<float>(v) / 255.0f - cfg.mean[c]) / cfg.std[c];
  EXPECT_EQ(t.pixels[(1 * 3 + c) * plane + y * 224 + x], want);
  // One tile: no thumbnail even when asked for.
  cfg.min_tiles = 1;
  cfg.max_tiles = 1;
  cfg.use_thumbnail = true;
  const Tiles one = preprocess(img, cfg);
  EXPECT_EQ(one.count, 1);
  EXPECT_FALSE(one.has_thumbnail);
}

TEST(VisionGolden, PreprocessRejectsBadConfig) {
  const Image img = procedural(8, 8);
  PreprocessConfig cfg;
  cfg.image_size = 0;
  EXPECT_THROW(preprocess(img, cfg), Error);
  cfg = {};
  cfg.std[1] = 0.0f;
  EXPECT_THROW(preprocess(img, cfg), Error);
  cfg = {};
  cfg.min_tiles = 13;
  EXPECT_THROW(preprocess(img, cfg), Error);
  EXPECT_THROW(preprocess(Image{}, PreprocessConfig{}), Error);
}

TEST(VisionGolden, FixturesAndProceduralMatchReference) {
  int n = 0;
  for (const auto& e : manifest()["images"])
    if (!e["source"].get<std::string>().starts_with("shared:")) n += check_entry(e);
  EXPECT_GE(n, 15);
}

TEST(VisionGolden, RealPhotosMatchReference) {
  const auto dir = edgevl::test::shared_data("images");
  if (dir.empty()) GTEST_SKIP() << edgevl::test::shared_data_missing("images");
  int n = 0;
  for (const auto& e : manifest()["images"])
    if (e["source"].get<std::string>().starts_with("shared:")) n += check_entry(e);
  EXPECT_GE(n, 1) << "no shared photo in the manifest";
}

TEST(VisionGolden, RealPhotoTiming) {
  const auto dir = edgevl::test::shared_data("images");
  if (dir.empty()) GTEST_SKIP() << edgevl::test::shared_data_missing("images");
  std::filesystem::path biggest;
  int64_t best = 0;
  for (const auto& e : manifest()["images"]) {
    const std::string src = e["source"];
    const int64_t px = e["width"].get<int64_t>() * e["height"].get<int64_t>();
    if (src.starts_with("shared:") && px > best) {
      best = px;
      biggest = dir.parent_path() / src.substr(7);
    }
  }
  ASSERT_FALSE(biggest.empty());
  PreprocessConfig cfg;
  double best_ms[2] = {1e30, 1e30};
  Tiles t;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const Image img = decode_image_file(biggest);
    const auto t1 = std::chrono::steady_clock::now();
    t = preprocess(img, cfg);
    const auto t2 = std::chrono::steady_clock::now();
    best_ms[0] = std::min(best_ms[0], std::chrono::duration<double, std::milli>(t1 - t0).count());
    best_ms[1] = std::min(best_ms[1], std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::printf("  %s: decode %.1f ms, preprocess %.1f ms (%d tiles, grid %dx%d)\n",
              biggest.filename().c_str(), best_ms[0], best_ms[1], t.count, t.grid.cols,
              t.grid.rows);
}

}  // namespace
}  // namespace edgevl::vision::test
