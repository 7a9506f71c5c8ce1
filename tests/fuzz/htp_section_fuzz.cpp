// libFuzzer target: arbitrary bytes as a .evb's `htp` section (the QNN context binary and the
// map from the model's graphs to its graphs) must parse or be refused with an edgevl::Error —
// never crash or read out of bounds. Nothing reaches the QNN library.
#include <cstdint>
#include <span>

#include "backend/qnn/htp_section.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const edgevl::qnn::HtpSection s =
        edgevl::qnn::parse_htp_section(std::span<const uint8_t>(data, size), "fuzz");
    (void)edgevl::qnn::serialize_htp_section(s);
  } catch (const edgevl::Error&) {
  }
  return 0;
}
