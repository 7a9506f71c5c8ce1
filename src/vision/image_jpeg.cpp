#include "vision/image_jpeg.h"

#ifdef EDGEVL_HAVE_LIBJPEG
#include <csetjmp>
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
#endif

namespace edgevl::vision::detail {

#ifndef EDGEVL_HAVE_LIBJPEG
bool have_libjpeg() {
  return false;
}
JpegResult decode_jpeg_libjpeg(std::span<const uint8_t>, int64_t) {
  JpegResult r;
  r.error = "built without libjpeg";
  return r;
}
#else
bool have_libjpeg() {
  return true;
}

namespace {

// libjpeg reports fatal errors through error_exit, which must not return. We longjmp
// back to decode_c. Everything in decode_c's frame is trivially destructible and all
// C++ allocation happens in callbacks that have returned, so the jump skips no destructor.
struct ErrorMgr {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_error(j_common_ptr ci) {
  auto* err = reinterpret_cast<ErrorMgr*>(ci->err);
  err->pub.format_message(ci, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings (corrupt-but-decodable data) are ignored, as Pillow does. Missing data is caught
// before decoding by the end-of-image check.
void on_message(j_common_ptr) {}

struct Sink {
  JpegResult* result;
  int64_t max_pixels;
  uint8_t* (*alloc)(Sink*, int w, int h);
};

uint8_t* sink_alloc(Sink* s, int w, int h) {
  if (int64_t{w} * h > s->max_pixels) {
    s->result->over_limit = true;
    s->result->width = w, s->result->height = h;
    return nullptr;
  }
  s->result->width = w, s->result->height = h;
  // Room for the RGB output plus one scratch row of up to 4 components.
  s->result->rgb.resize(static_cast<size_t>(w) * h * 3 + static_cast<size_t>(w) * 4);
  return s->result->rgb.data();
}

inline uint8_t muldiv255(int a, int b) {
  // Pillow's MULDIV255: a*b/255 rounded, with its exact integer steps.
  const int t = a * b + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}

// Returns 0 on success, 1 on a libjpeg error (message in err.message), 2 if over limit.
int decode_c(const uint8_t* data, unsigned long size, Sink* sink, ErrorMgr* err) {
  jpeg_decompress_struct ci;
  ci.err = jpeg_std_error(&err->pub);
  err->pub.error_exit = on_error;
  err->pub.output_message = on_message;
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&ci);
    return 1;
  }
  jpeg_create_decompress(&ci);
  jpeg_mem_src(&ci, data, size);
  jpeg_read_header(&ci, TRUE);
  const int nc = ci.num_components;
  if (nc != 1 && nc != 3 && nc != 4) {
    std::snprintf(err->message, sizeof err->message, "cannot handle %d-component JPEG", nc);
    jpeg_destroy_decompress(&ci);
    return 1;
  }
  ci.out_color_space = nc == 1 ? JCS_GRAYSCALE : (nc == 3 ? JCS_RGB : JCS_CMYK);
  const int w = static_cast<int>(ci.image_width), h = static_cast<int>(ci.image_height);
  uint8_t* out = (w > 0 && h > 0) ? sink->alloc(sink, w, h) : nullptr;
  if (!out) {
    jpeg_destroy_decompress(&ci);
    if (w > 0 && h > 0) return 2;
    std::snprintf(err->message, sizeof err->message, "image has zero size (%dx%d)", w, h);
    return 1;
  }
  jpeg_start_decompress(&ci);
  uint8_t* scratch = out + static_cast<size_t>(w) * h * 3;
  while (ci.output_scanline < ci.output_height) {
    uint8_t* row = out + static_cast<size_t>(ci.output_scanline) * w * 3;
    JSAMPROW dst = nc == 3 ? row : scratch;
    jpeg_read_scanlines(&ci, &dst, 1);
    if (nc == 1) {
      for (int x = 0; x < w; ++x) row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = scratch[x];
    } else if (nc == 4) {
      for (int x = 0; x < w; ++x) {
        // Pillow reads JPEG CMYK as "CMYK;I" (inverted, Adobe convention), then
        // cmyk2rgb: nk - nk*c/255 per channel, nk = 255 - k.
        const uint8_t* s = scratch + 4 * x;
        const int nk = 255 - (255 - s[3]);  // 255 - Pillow's K
        for (int c = 0; c < 3; ++c)
          row[3 * x + c] = static_cast<uint8_t>(nk - muldiv255(255 - s[c], nk));
      }
    }
  }
  jpeg_finish_decompress(&ci);
  jpeg_destroy_decompress(&ci);
  return 0;
}

}  // namespace

JpegResult decode_jpeg_libjpeg(std::span<const uint8_t> bytes, int64_t max_pixels) {
  JpegResult r;
  Sink sink{&r, max_pixels, sink_alloc};
  ErrorMgr err{};
  const int rc = decode_c(bytes.data(), static_cast<unsigned long>(bytes.size()), &sink, &err);
  if (rc == 1) {
    r.error = err.message;
    r.rgb.clear();
  } else if (rc == 2) {
    r.rgb.clear();
  } else {
    r.rgb.resize(static_cast<size_t>(r.width) * r.height * 3);  // drop the scratch row
  }
  return r;
}
#endif

}  // namespace edgevl::vision::detail
