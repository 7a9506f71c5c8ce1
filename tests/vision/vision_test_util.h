#pragma once
// Shared helpers for the vision tests: the golden manifest, CRC32, pixel diffs and the
// procedural image that tools/golden/make_image_goldens.py also generates.
#include <nlohmann/json.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/test_paths.h"
#include "vision/image.h"

namespace edgevl::vision::test {

inline std::filesystem::path images_dir() {
  return edgevl::test::fixtures_dir() / "images";
}

inline const nlohmann::json& manifest() {
  static const nlohmann::json j = [] {
    std::ifstream f(images_dir() / "goldens.json");
    if (!f) throw std::runtime_error("tests/fixtures/images/goldens.json is missing");
    return nlohmann::json::parse(f);
  }();
  return j;
}

inline std::string crc32_hex(const std::vector<uint8_t>& bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return fmt::format("{:08x}", c ^ 0xFFFFFFFFu);
}

// Same formula as procedural() in make_image_goldens.py (uint32 wrap-around arithmetic).
inline Image procedural(int w, int h) {
  Image img{w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
  for (uint32_t y = 0; y < static_cast<uint32_t>(h); ++y)
    for (uint32_t x = 0; x < static_cast<uint32_t>(w); ++x)
      for (uint32_t c = 0; c < 3; ++c) {
        uint32_t hsh = (x * 73856093u) ^ (y * 19349663u) ^ (c * 83492791u + 1u);
        hsh *= 2654435761u;
        hsh ^= hsh >> 15;
        const uint8_t noise = static_cast<uint8_t>(hsh >> 24);
        const uint8_t ramp = static_cast<uint8_t>((x * (c + 1) + y * 2) & 255u);
        img.rgb[(static_cast<size_t>(y) * w + x) * 3 + c] =
            x < static_cast<uint32_t>(w / 2) ? ramp : noise;
      }
  return img;
}

// Every step-th row and column of img (what the goldens store for big images).
inline Image subsample(const Image& img, int step) {
  if (step == 1) return img;
  Image out{(img.width + step - 1) / step, (img.height + step - 1) / step, {}};
  out.rgb.reserve(static_cast<size_t>(out.width) * out.height * 3);
  for (int y = 0; y < img.height; y += step)
    for (int x = 0; x < img.width; x += step)
      for (int c = 0; c < 3; ++c)
        out.rgb.push_back(img.rgb[(static_cast<size_t>(y) * img.width + x) * 3 + c]);
  return out;
}

// Vertical stack of same-width images (the goldens stack tiles this way).
inline Image vstack(const std::vector<Image>& v) {
  Image out{v.empty() ? 0 : v[0].width, 0, {}};
  for (const Image& i : v) {
    out.height += i.height;
    out.rgb.insert(out.rgb.end(), i.rgb.begin(), i.rgb.end());
  }
  return out;
}

struct Diff {
  int max = 0;
  double mean = 0;
  double frac_nonzero = 0;
};

// Sizes must match (checked by the caller with EXPECT_EQ first); returns max=256 if not.
inline Diff diff(const Image& a, const Image& b) {
  Diff d;
  if (a.width != b.width || a.height != b.height || a.rgb.size() != b.rgb.size()) {
    d.max = 256;
    return d;
  }
  size_t nz = 0;
  double sum = 0;
  for (size_t i = 0; i < a.rgb.size(); ++i) {
    const int e = std::abs(int{a.rgb[i]} - int{b.rgb[i]});
    d.max = std::max(d.max, e);
    sum += e;
    nz += e != 0;
  }
  if (!a.rgb.empty()) {
    d.mean = sum / static_cast<double>(a.rgb.size());
    d.frac_nonzero = static_cast<double>(nz) / static_cast<double>(a.rgb.size());
  }
  return d;
}

// 24-bit BMP bytes (bottom-up rows, 4-byte aligned): how tests hand a procedural image to the
// decoders, the CLI and the server.
inline std::vector<uint8_t> bmp_bytes(const vision::Image& img) {
  const uint32_t row = uint32_t(img.width * 3 + 3) & ~3u, size = 54 + row * uint32_t(img.height);
  std::vector<uint8_t> b(size, 0);
  auto put32 = [&](size_t at, uint32_t v) {
    for (int k = 0; k < 4; ++k) b[at + size_t(k)] = uint8_t(v >> (8 * k));
  };
  b[0] = 'B', b[1] = 'M';
  put32(2, size), put32(10, 54), put32(14, 40), put32(18, uint32_t(img.width));
  put32(22, uint32_t(img.height));
  b[26] = 1, b[28] = 24;
  put32(34, row * uint32_t(img.height));
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x)
      for (int c = 0; c < 3; ++c)  // BGR
        b[54 + size_t(img.height - 1 - y) * row + size_t(x) * 3 + size_t(2 - c)] =
            img.rgb[(size_t(y) * size_t(img.width) + size_t(x)) * 3 + size_t(c)];
  return b;
}

inline void write_bmp(const std::filesystem::path& path, const vision::Image& img) {
  const std::vector<uint8_t> b = bmp_bytes(img);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

}  // namespace edgevl::vision::test
