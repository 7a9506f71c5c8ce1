// Decoder behaviour: every supported container/pixel format, and clear errors (never a
// crash) on bad input. Pixel parity with Pillow is in preprocess_golden_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "core/error.h"
#include "vision/image.h"
#include "vision/vision_test_util.h"

namespace edgevl::vision::test {
namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::filesystem::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Expects decode to throw edgevl::Error whose message contains every word in `needles`.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message '" << e.what() << "' lacks '" << n << "'";
  }
}

std::filesystem::path src(const std::string& f) {
  return images_dir() / "src" / f;
}

TEST(ImageDecode, EveryFormatDecodes) {
  struct Case {
    const char* file;
    int w, h;
  };
  for (const Case& c :
       {Case{"square_64.png", 64, 64}, Case{"rgba.png", 120, 80}, Case{"palette.png", 90, 60},
        Case{"gray16.png", 50, 40}, Case{"rgb16.png", 45, 30}, Case{"gray.jpg", 100, 75},
        Case{"progressive.jpg", 200, 150}, Case{"baseline.jpg", 160, 120},
        Case{"bmp24.bmp", 70, 50}}) {
    SCOPED_TRACE(c.file);
    const Image img = decode_image_file(src(c.file));
    EXPECT_EQ(img.width, c.w);
    EXPECT_EQ(img.height, c.h);
    EXPECT_EQ(img.rgb.size(), static_cast<size_t>(c.w) * c.h * 3);
  }
}

TEST(ImageDecode, GrayIsReplicatedAndGray16IsClippedLikePillow) {
  const Image g = decode_image_file(src("gray.jpg"));
  for (size_t i = 0; i < g.rgb.size(); i += 3) {
    ASSERT_EQ(g.rgb[i], g.rgb[i + 1]);
    ASSERT_EQ(g.rgb[i], g.rgb[i + 2]);
  }
  // gray16.png row 0 holds 0, 1300, 2600, ...: Pillow's I;16 -> RGB saturates at 255.
  const Image g16 = decode_image_file(src("gray16.png"));
  EXPECT_EQ(g16.rgb[0], 0);
  EXPECT_EQ(g16.rgb[3], 255);
  // rgb16.png pixel 0 is (0, 0, 257): 16-bit RGB keeps the high byte -> (0, 0, 1).
  const Image c16 = decode_image_file(src("rgb16.png"));
  EXPECT_EQ(c16.rgb[2], 1);
}

TEST(ImageDecode, AlphaIsDroppedNotComposited) {
  // rgba.png has alpha = 2*x; column 0 is fully transparent. convert('RGB') keeps the
  // colour as stored, so column 0 must equal its stored colour, not white or black.
  const Image a = decode_image_file(src("rgba.png"));
  const Image gold = decode_image_file(images_dir() / "golden" / "rgba_decoded.png");
  EXPECT_EQ(diff(a, gold).max, 0);
}

TEST(ImageDecode, MemoryAndFileAgree) {
  const auto bytes = read_bytes(src("progressive.jpg"));
  const Image m = decode_image_memory(bytes, "progressive.jpg");
  const Image f = decode_image_file(src("progressive.jpg"));
  EXPECT_EQ(m.rgb, f.rgb);
}

TEST(ImageDecode, TruncatedFilesFailLikePillow) {
  for (const char* f : {"baseline.jpg", "progressive.jpg", "square_64.png", "bmp24.bmp"}) {
    SCOPED_TRACE(f);
    auto bytes = read_bytes(src(f));
    // Pillow also fails on all of these except a PNG cut inside or before IEND (below).
    const bool png = std::string(f).ends_with(".png");
    for (size_t keep : {bytes.size() / 2, png ? bytes.size() / 3 : bytes.size() - 12, size_t{10}}) {
      std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(keep));
      expect_error([&] { decode_image_memory(cut, "cut.img"); }, {"cut.img"});
    }
  }
  // Pillow accepts these: a PNG cut inside or before its IEND chunk, and a BMP without the
  // padding of its last row (70 px * 3 = 210 bytes, stride 212).
  const Image png = decode_image_file(src("square_64.png"));
  for (size_t cut : {2, 6, 12}) {
    auto bytes = read_bytes(src("square_64.png"));
    bytes.resize(bytes.size() - cut);
    Image img;
    EXPECT_NO_THROW(img = decode_image_memory(bytes, "cut.png")) << cut;
    EXPECT_EQ(img.rgb, png.rgb) << cut;
  }
  auto bmp = read_bytes(src("bmp24.bmp"));
  bmp.resize(bmp.size() - 2);
  EXPECT_NO_THROW(decode_image_memory(bmp, "bmp24.bmp"));
  auto jpg = read_bytes(src("baseline.jpg"));
  jpg.resize(jpg.size() - 2);  // drop only the EOI marker
  expect_error([&] { decode_image_memory(jpg, "t.jpg"); }, {"t.jpg", "truncated"});
}

TEST(ImageDecode, GarbageAndUnsupportedFail) {
  std::vector<uint8_t> junk(1000);
  std::mt19937 rng(7);
  for (auto& b : junk) b = static_cast<uint8_t>(rng());
  junk[0] = 'x';
  expect_error([&] { decode_image_memory(junk, "junk.bin"); }, {"junk.bin", "not a JPEG"});
  junk[0] = 0xFF, junk[1] = 0xD8, junk[2] = 0xFF;  // JPEG magic, garbage after
  expect_error([&] { decode_image_memory(junk, "junk.jpg"); }, {"junk.jpg", "JPEG"});
  const std::string gif = "GIF89a\x01\x00\x01\x00";
  const std::vector<uint8_t> g(gif.begin(), gif.end());
  expect_error([&] { decode_image_memory(g, "a.gif"); }, {"a.gif", "GIF", "not supported"});
}

TEST(ImageDecode, EmptyMissingAndDirectoryFail) {
  edgevl::test::TempDir tmp;
  write_bytes(tmp.path() / "empty.png", {});
  expect_error([&] { decode_image_file(tmp.path() / "empty.png"); }, {"empty.png", "0 bytes"});
  expect_error([&] { decode_image_memory({}, "mem"); }, {"mem", "0 bytes"});
  expect_error([&] { decode_image_file(tmp.path() / "nope.jpg"); }, {"nope.jpg", "not found"});
  expect_error([&] { decode_image_file(tmp.path()); }, {"not a regular file"});
}

TEST(ImageDecode, PixelLimitCheckedBeforeDecoding) {
  DecodeLimits lim;
  lim.max_pixels = 64 * 64 - 1;
  expect_error([&] { decode_image_file(src("square_64.png"), lim); },
               {"square_64.png", "64x64", "4096", "4095"});
  lim.max_pixels = 64 * 64;
  EXPECT_NO_THROW(decode_image_file(src("square_64.png"), lim));
  // A PNG header claiming 100000x100000 with no pixel data: refused by the limit, not OOM.
  auto png = read_bytes(src("square_64.png"));
  const uint8_t big[8] = {0x00, 0x01, 0x86, 0xA0, 0x00, 0x01, 0x86, 0xA0};
  std::copy(big, big + 8, png.begin() + 16);
  expect_error([&] { decode_image_memory(png, "huge.png"); }, {"huge.png"});
}

TEST(ImageDecode, CorruptPngChunkLengthFailsWithoutHugeAllocation) {
  // Found by the fuzzer: an IDAT length of ~1.2 GB made stb reserve that much memory.
  auto png = read_bytes(src("square_64.png"));
  ASSERT_EQ(std::string(png.begin() + 37, png.begin() + 41), "IDAT");
  const uint8_t len[4] = {0x49, 0x49, 0x2A, 0x38};
  std::copy(len, len + 4, png.begin() + 33);
  expect_error([&] { decode_image_memory(png, "bad.png"); }, {"bad.png", "IDAT", "declares"});
}

TEST(ImageDecode, JpegWithUndefinedHuffmanTableFails) {
  // Found by the fuzzer: stb read an undefined table from uninitialised memory and crashed
  // (only when earlier decodes left the heap in a particular state). Pillow refuses it too
  // ("broken data stream"); libjpeg reports its own reason.
  expect_error([&] { decode_image_file(images_dir() / "bad" / "fuzz_undefined_table.jpg"); },
               {"fuzz_undefined_table.jpg", "JPEG"});
}

TEST(ImageDecode, ZeroSizedBmpFails) {
  auto bmp = read_bytes(src("bmp24.bmp"));
  std::fill(bmp.begin() + 18, bmp.begin() + 22, 0);  // biWidth = 0
  expect_error([&] { decode_image_memory(bmp, "zero.bmp"); }, {"zero.bmp"});
}

TEST(ImageDecode, MutatedInputsNeverCrash) {
  // A small in-tree fuzz pass; tests/fuzz/image_fuzz.cpp is the libFuzzer version.
  std::mt19937 rng(1234);
  DecodeLimits lim;
  lim.max_pixels = 1 << 20;
  int errors = 0, ok = 0;
  for (const char* f : {"baseline.jpg", "progressive.jpg", "palette.png", "rgb16.png", "gray16.png",
                        "bmp24.bmp", "rgba.png"}) {
    const auto base = read_bytes(src(f));
    for (int it = 0; it < 150; ++it) {
      auto b = base;
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
      if (rng() % 4 == 0) b.resize(1 + rng() % b.size());
      try {
        const Image img = decode_image_memory(b, f, lim);
        ASSERT_EQ(img.rgb.size(), static_cast<size_t>(img.width) * img.height * 3);
        ++ok;
      } catch (const Error&) {
        ++errors;
      }
    }
  }
  std::printf("  mutated inputs: %d decoded, %d rejected with edgevl::Error\n", ok, errors);
}

}  // namespace
}  // namespace edgevl::vision::test
