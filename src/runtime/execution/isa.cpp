#include "runtime/execution/isa.h"

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"

namespace edgevl {

std::vector<std::string> isa_levels() {
  return cpu::isa_levels();
}

void select_isa(std::string_view level) {
  cpu::select_isa(level.empty() ? "best" : level);
}

const char* active_isa() {
  return cpu::active_isa();
}

IsaReport isa_report() {
  return IsaReport{.cpu_model = cpu::cpu_model_name(),
                   .cpu_features = cpu::cpu_features_string(),
                   .level = cpu::active_isa(),
                   .quant_kernels = cpu::quant_kernel_isa(),
                   .kernel_paths = cpu::kernel_paths()};
}

int default_thread_count() {
  return cpu::default_thread_count();
}

}  // namespace edgevl
