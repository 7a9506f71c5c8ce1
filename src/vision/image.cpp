// Decoding with stb_image, shaped to match the reference `Image.open(f).convert('RGB')`:
//  * Alpha is DROPPED, not composited: Pillow's RGBA->RGB, LA->RGB and P(+transparency)->RGB
//    conversions copy the colour channels and ignore alpha. stb's 4->3 / 2->3 channel
//    conversion does the same.
//  * 16-bit PNG: Pillow keeps the high byte of RGB/RGBA/LA samples (as stb does), but opens
//    16-bit grayscale as mode I;16 whose convert('RGB') CLIPS the value to 255 instead of
//    scaling it. We decode that one case at 16 bits and clip the same way.
//  * Gray images are replicated to R=G=B; palettes are expanded. EXIF orientation is not
//    applied (the reference does not call exif_transpose).
//  * A JPEG without an end-of-image marker, or an uncompressed BMP shorter than its pixel
//    rows, is refused: Pillow raises "image file is truncated" where stb would silently
//    fill the missing part. A PNG that ends after its last data chunk, without IEND, is
//    decoded, as Pillow does.
// JPEG: with EDGEVL_HAVE_LIBJPEG the decoder is libjpeg-turbo with Pillow's settings
// (image_jpeg.cpp) and pixels are identical to Pillow's. Without it stb_image decodes JPEG
// and pixels can differ by a few levels (its chroma upsampling and colour conversion round
// differently). PNG and BMP are exact either way.
#include "vision/image.h"

#include <stb/stb_image.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <utility>

#include "core/error.h"
#include "vision/image_jpeg.h"
#include "vision/image_jpeg_check.h"

namespace edgevl::vision {
namespace {

enum class Format { kJpeg, kPng, kBmp, kUnknown };

Format sniff(std::span<const uint8_t> b) {
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return Format::kJpeg;
  static const uint8_t png[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (b.size() >= 8 && std::memcmp(b.data(), png, 8) == 0) return Format::kPng;
  if (b.size() >= 2 && b[0] == 'B' && b[1] == 'M') return Format::kBmp;
  return Format::kUnknown;
}

const char* format_name(Format f) {
  switch (f) {
    case Format::kJpeg: return "JPEG";
    case Format::kPng: return "PNG";
    case Format::kBmp: return "BMP";
    default: return "unknown";
  }
}

// Names a few formats we recognise but do not read, for a more helpful message.
const char* other_format(std::span<const uint8_t> b) {
  auto starts = [&](const char* m) {
    const size_t n = std::strlen(m);
    return b.size() >= n && std::memcmp(b.data(), m, n) == 0;
  };
  if (starts("GIF8")) return "GIF";
  if (starts("RIFF") && b.size() >= 12 && std::memcmp(b.data() + 8, "WEBP", 4) == 0) return "WebP";
  if (starts("II*") || starts("MM")) return "TIFF";
  if (b.size() >= 12 && std::memcmp(b.data() + 4, "ftyp", 4) == 0) return "HEIF/AVIF";
  return nullptr;
}

uint32_t le32(std::span<const uint8_t> b, size_t at) {
  return uint32_t{b[at]} | uint32_t{b[at + 1]} << 8 | uint32_t{b[at + 2]} << 16 |
         uint32_t{b[at + 3]} << 24;
}

// Uncompressed BMPs must hold every pixel row; only the last row's padding may be missing.
// This mirrors Pillow, which raises "image file is truncated" where stb would read zeros.
// RLE-compressed BMPs are left to stb's own checks.
bool bmp_pixels_present(std::span<const uint8_t> b) {
  if (b.size() < 26) return false;
  const uint32_t offset = le32(b, 10), header = le32(b, 14);
  int64_t w = 0, h = 0, bpp = 0;
  if (header == 12) {
    w = b[18] | b[19] << 8;
    h = b[20] | b[21] << 8;
    bpp = b[24] | b[25] << 8;
  } else {
    if (b.size() < 34) return false;
    w = static_cast<int32_t>(le32(b, 18));
    h = static_cast<int32_t>(le32(b, 22));
    bpp = b[28] | b[29] << 8;
    const uint32_t compression = le32(b, 30);
    if (compression != 0 && compression != 3 && compression != 6) return true;
  }
  if (h < 0) h = -h;
  if (w <= 0 || h == 0 || bpp <= 0) return true;  // stb reports these itself
  const int64_t row = (w * bpp + 7) / 8, stride = (w * bpp + 31) / 32 * 4;
  return static_cast<int64_t>(b.size()) >= int64_t{offset} + stride * (h - 1) + row;
}

uint32_t be32(std::span<const uint8_t> b, size_t at) {
  return uint32_t{b[at]} << 24 | uint32_t{b[at + 1]} << 16 | uint32_t{b[at + 2]} << 8 |
         uint32_t{b[at + 3]};
}

// Every PNG chunk before IEND must fit in the file. stb reserves a chunk's declared length
// before reading it, so a corrupt length would otherwise allocate up to 4 GiB.
// *end_without_iend is set to the end of the last whole chunk when the file has no IEND:
// Pillow decodes such a file (all image data is there), stb refuses it, so the caller
// appends an IEND.
std::string png_chunk_problem(std::span<const uint8_t> b, size_t* end_without_iend) {
  size_t pos = 8;
  *end_without_iend = 0;
  while (pos + 8 <= b.size()) {
    const uint64_t len = be32(b, pos);
    const std::string type(reinterpret_cast<const char*>(b.data() + pos + 4), 4);
    if (type == "IEND") return {};
    if (pos + 12 + len > b.size())
      return fmt::format(
          "chunk '{}' at offset {} declares {} bytes but only {} remain "
          "(truncated or corrupt)",
          type, pos, len, b.size() - pos - 8);
    pos += 12 + len;
  }
  *end_without_iend = pos;
  return {};
}

// PNG IHDR: bit depth at byte 24, colour type at byte 25 (0 = grayscale without alpha).
bool is_png_gray16(std::span<const uint8_t> b) {
  return b.size() >= 26 && std::memcmp(b.data() + 12, "IHDR", 4) == 0 && b[24] == 16 && b[25] == 0;
}

struct StbFree {
  void operator()(void* p) const { stbi_image_free(p); }
};

}  // namespace

Image decode_image_memory(std::span<const uint8_t> bytes, const std::string& name,
                          const DecodeLimits& lim) {
  check(!bytes.empty(), "{}: image file is empty (0 bytes)", name);
  check(bytes.size() <= static_cast<size_t>(std::numeric_limits<int>::max()),
        "{}: image file has {} bytes, more than the decoder's limit of {}", name, bytes.size(),
        std::numeric_limits<int>::max());
  const Format fmt = sniff(bytes);
  if (fmt == Format::kUnknown) {
    if (const char* other = other_format(bytes))
      fail("{}: {} images are not supported (edgevl reads JPEG, PNG and BMP)", name, other);
    fail("{}: not a JPEG, PNG or BMP image (unrecognised header bytes)", name);
  }
  if (fmt == Format::kJpeg) {
    // Pillow fails on a JPEG without its end-of-image marker; stb would also need every
    // Huffman table defined (libjpeg substitutes the standard ones, like Pillow).
    const std::string problem =
        detail::jpeg_structure_problem(bytes, /*require_tables=*/!detail::have_libjpeg());
    check(problem.empty(), "{}: JPEG {}", name, problem);
  }
  if (fmt == Format::kJpeg && detail::have_libjpeg()) {
    detail::JpegResult r = detail::decode_jpeg_libjpeg(bytes, lim.max_pixels);
    check(!r.over_limit, "{}: {}x{} = {} pixels exceeds the limit of {} pixels", name, r.width,
          r.height, int64_t{r.width} * r.height, lim.max_pixels);
    check(r.error.empty(), "{}: cannot decode JPEG data: {}", name, r.error);
    return Image{r.width, r.height, std::move(r.rgb)};
  }
  std::vector<uint8_t> patched;
  if (fmt == Format::kPng) {
    size_t end = 0;
    const std::string problem = png_chunk_problem(bytes, &end);
    check(problem.empty(), "{}: PNG {}", name, problem);
    if (end > 0) {
      static const uint8_t iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
      patched.assign(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(end));
      patched.insert(patched.end(), iend, iend + 12);
      bytes = patched;
    }
  }
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int len = static_cast<int>(bytes.size());

  // Header first: the limit is enforced before any pixel buffer exists.
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(data, len, &w, &h, &comp)) {
    const char* why = stbi_failure_reason();
    fail("{}: cannot read the {} header: {}", name, format_name(fmt), why ? why : "unknown");
  }
  check(w > 0 && h > 0, "{}: {} image has zero size ({}x{})", name, format_name(fmt), w, h);
  const int64_t pixels = int64_t{w} * h;
  check(pixels <= lim.max_pixels, "{}: {}x{} = {} pixels exceeds the limit of {} pixels", name, w,
        h, pixels, lim.max_pixels);
  if (fmt == Format::kBmp)
    check(bmp_pixels_present(bytes), "{}: BMP pixel data is truncated ({} bytes)", name,
          bytes.size());

  Image img{w, h, std::vector<uint8_t>(static_cast<size_t>(pixels) * 3)};
  int dw = 0, dh = 0, dn = 0;
  auto decode_fail = [&]() {
    const char* why = stbi_failure_reason();
    fail("{}: cannot decode {} data: {}", name, format_name(fmt), why ? why : "unknown");
  };
  if (fmt == Format::kPng && is_png_gray16(bytes)) {
    std::unique_ptr<stbi_us, StbFree> px(stbi_load_16_from_memory(data, len, &dw, &dh, &dn, 1));
    if (!px) decode_fail();
    check(dw == w && dh == h, "{}: decoded size {}x{} differs from the header's {}x{}", name, dw,
          dh, w, h);
    for (int64_t i = 0; i < pixels; ++i) {
      const uint8_t v = px.get()[i] > 255 ? 255 : static_cast<uint8_t>(px.get()[i]);
      img.rgb[i * 3 + 0] = img.rgb[i * 3 + 1] = img.rgb[i * 3 + 2] = v;
    }
    return img;
  }
  std::unique_ptr<stbi_uc, StbFree> px(stbi_load_from_memory(data, len, &dw, &dh, &dn, 3));
  if (!px) decode_fail();
  check(dw == w && dh == h, "{}: decoded size {}x{} differs from the header's {}x{}", name, dw, dh,
        w, h);
  std::memcpy(img.rgb.data(), px.get(), img.rgb.size());
  return img;
}

std::vector<uint8_t> read_image_file(const std::filesystem::path& p) {
  const std::string name = p.string();
  std::error_code ec;
  const auto st = std::filesystem::status(p, ec);
  check(!ec && std::filesystem::exists(st), "{}: image file not found", name);
  check(std::filesystem::is_regular_file(st), "{}: not a regular file", name);
  std::ifstream f(p, std::ios::binary | std::ios::ate);
  check(f.good(), "{}: cannot open image file: {}", name, std::strerror(errno));
  const std::streamoff size = f.tellg();
  check(size >= 0, "{}: cannot determine the file size", name);
  check(size > 0, "{}: image file is empty (0 bytes)", name);
  check(static_cast<uint64_t>(size) <= static_cast<uint64_t>(std::numeric_limits<int>::max()),
        "{}: image file has {} bytes, more than the decoder's limit of {}", name, size,
        std::numeric_limits<int>::max());
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(bytes.data()), size);
  check(f.gcount() == size, "{}: read {} of {} bytes", name, f.gcount(), size);
  return bytes;
}

Image decode_image_file(const std::filesystem::path& p, const DecodeLimits& lim) {
  return decode_image_memory(read_image_file(p), p.string(), lim);
}

}  // namespace edgevl::vision
