#pragma once
// Image decoding for the vision front end. The reference is InternVL's
// `Image.open(f).convert('RGB')` (Pillow); decode_* reproduce what that call yields for
// JPEG, PNG and BMP, including Pillow's quirks (see image.cpp).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace edgevl::vision {

// 8-bit RGB, row-major, 3 bytes per pixel, no padding.
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
};

struct DecodeLimits {
  // Checked against the header's dimensions before any pixel memory is allocated.
  int64_t max_pixels = 50'000'000;
};

// Throws edgevl::Error naming the file for: missing/unreadable file, 0 bytes, a format other
// than JPEG/PNG/BMP, undecodable or truncated data, zero dimensions, width*height > limit.
// The bytes of an image file, with the same checks (missing, not a file, empty, too large).
std::vector<uint8_t> read_image_file(const std::filesystem::path& p);
Image decode_image_file(const std::filesystem::path& p, const DecodeLimits& lim = {});
// `name` is only used in error messages.
Image decode_image_memory(std::span<const uint8_t> bytes, const std::string& name,
                          const DecodeLimits& lim = {});

}  // namespace edgevl::vision
