#pragma once
// JPEG decoding with libjpeg-turbo, the decoder Pillow itself uses, so the pixels are the
// reference's bit for bit (internal to src/vision). Built only with EDGEVL_HAVE_LIBJPEG;
// otherwise image.cpp falls back to stb_image, which differs by a few levels.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace edgevl::vision::detail {

bool have_libjpeg();

struct JpegResult {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  std::string error;        // non-empty on failure
  bool over_limit = false;  // the header's size exceeded max_pixels (nothing decoded)
};

// Decodes to RGB as Image.open(...).convert('RGB') does: gray replicated, CMYK read with
// Adobe polarity (inverted) then Pillow's cmyk2rgb. Checks width*height against
// max_pixels from the header, before allocating pixels.
JpegResult decode_jpeg_libjpeg(std::span<const uint8_t> bytes, int64_t max_pixels);

}  // namespace edgevl::vision::detail
