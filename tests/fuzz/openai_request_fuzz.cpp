// libFuzzer entry for the server's request parsing: any body must either parse into a
// validated request or throw ApiError with a 4xx status - never crash, hang or allocate
// without bound (the data: URI and image limits hold).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "app/server/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace edgevl::server;
  RequestLimits lim;
  lim.max_image_bytes = 1 << 16;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    const ChatRequest r = parse_chat_request(body, lim);
    if (r.messages.empty() || r.messages.back().role != "user") std::abort();
    for (const auto& m : r.messages)
      for (const auto& img : m.images)
        if (img.bytes.size() > lim.max_image_bytes || (img.bytes.empty() && img.url.empty()))
          std::abort();
    if (r.sampling.max_tokens && *r.sampling.max_tokens < 1) std::abort();
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) std::abort();
  }
  try {
    const CompletionRequest r = parse_completion_request(body, lim);
    if (r.sampling.temperature < 0 || r.sampling.temperature > 2) std::abort();
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) std::abort();
  }
  return 0;
}
