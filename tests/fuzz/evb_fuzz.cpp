// libFuzzer target: arbitrary bytes as a .evb context binary must load or be refused with an
// edgevl::Error — never crash, hang or read out of bounds. The bytes go through a memfd so
// the real mmap loading path is exercised.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "runtime/execution/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("evb_fuzz", 0);
  if (fd < 0) return 0;
  if (size > 0 && write(fd, data, size) != ssize_t(size)) {
    close(fd);
    return 0;
  }
  try {
    edgevl::Model m("/proc/self/fd/" + std::to_string(fd));
    (void)m.tokenizer().encode("fuzz <|im_end|> text");
  } catch (const edgevl::Error&) {
  }
  close(fd);
  return 0;
}
