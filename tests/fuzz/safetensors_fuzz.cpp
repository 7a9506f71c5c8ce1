// libFuzzer entry point for the safetensors header parser: any byte string must either parse
// into views that lie inside the input, or throw edgevl::Error. Anything else (a crash, a
// sanitizer report, another exception type) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "core/error.h"
#include "format/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const edgevl::SafetensorsFile f(std::span<const uint8_t>(data, size), "fuzz-input");
    uint64_t sum = 0;
    for (const auto& t : f.tensors()) {
      // Every view must lie inside the input: ASan catches a read past it.
      if (t.data < data || t.data + t.nbytes > data + size) std::abort();
      if (t.nbytes > 0) sum += t.data[0] + t.data[t.nbytes - 1];
      if (f.find(t.name) == nullptr) std::abort();
      const bool is_float = t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16";
      if (is_float && t.numel() <= (1 << 16)) {
        std::vector<float> out(size_t(t.numel()));
        edgevl::tensor_to_f32(t, out.data());
      }
    }
    (void)sum;
  } catch (const edgevl::Error&) {
    // Rejected input, with a message: the expected outcome for most inputs.
  }
  return 0;
}
