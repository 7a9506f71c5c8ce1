// libFuzzer entry for the video decoder: any byte string must either decode to consistent
// sampled frames or throw edgevl::Error - never crash, hang or allocate unboundedly (small
// pixel and frame limits keep each run cheap). Seed it with tests/fixtures/video.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "vision/video.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  edgevl::vision::VideoLimits lim;
  lim.max_pixels = 1 << 18;
  lim.max_frames = 512;
  try {
    const auto v = edgevl::vision::decode_video_memory({data, size}, "fuzz-input", {}, lim);
    if (v.frames.size() != v.indices.size()) std::abort();
    for (const auto& f : v.frames)
      if (f.rgb.size() != static_cast<size_t>(f.width) * f.height * 3) std::abort();
  } catch (const edgevl::Error&) {
  }
  return 0;
}
