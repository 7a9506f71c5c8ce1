// libFuzzer entry for the image decoder: any byte string must either decode to a
// consistent image or throw edgevl::Error - never crash, hang or allocate unboundedly
// (the small pixel limit keeps each run cheap).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "vision/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  edgevl::vision::DecodeLimits lim;
  lim.max_pixels = 1 << 20;
  try {
    const auto img = edgevl::vision::decode_image_memory({data, size}, "fuzz-input", lim);
    if (img.rgb.size() != static_cast<size_t>(img.width) * img.height * 3) std::abort();
  } catch (const edgevl::Error&) {
  }
  return 0;
}
