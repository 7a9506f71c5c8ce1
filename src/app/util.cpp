#include <sys/resource.h>

#include <fmt/format.h>

#include "app/commands.h"
#include "runtime/execution/isa.h"

namespace edgevl::app {

void add_isa_option(CLI::App* cmd, std::string* isa) {
  std::string levels;
  for (const std::string& l : isa_levels()) levels += (levels.empty() ? "" : ", ") + l;
  cmd->add_option("--isa", *isa,
                  "Kernel level: best (default), " + levels +
                      "; a lower level than the CPU's "
                      "best measures that path")
      ->envname("EDGEVL_ISA");
}

void apply_isa(const std::string& isa) {
  select_isa(isa);
}

double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;  // Linux reports KiB
}

std::string human_bytes(uint64_t n) {
  const char* unit[] = {"B", "KB", "MB", "GB", "TB"};
  double v = double(n);
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.2f} {}", v, unit[u]);
}

}  // namespace edgevl::app
