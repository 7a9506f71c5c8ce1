#pragma once
// Tests that run a kernel at every ISA level loop over the backend's own level list
// (cpu::isa_levels()), so a new level is tested without editing them. Levels the CPU lacks
// skip with a message.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/kernels.h"

namespace edgevl::test {

// Every level this build knows, with the test-only ones ("amx-all-rows": AMX kernels for calls
// of any size, ...).
inline std::vector<std::string> all_isa_levels() {
  return cpu::isa_levels(/*with_test_hooks=*/true);
}

// The levels above scalar that this CPU runs (forces each to check; leaves "best" active).
inline std::vector<std::string> runnable_simd_levels() {
  std::vector<std::string> v;
  for (const std::string& l : all_isa_levels())
    if (l != "scalar" && cpu::force_isa(l)) v.push_back(l);
  cpu::force_isa("best");
  return v;
}

// gtest parameter names: letters, digits and '_' only.
inline std::string isa_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

}  // namespace edgevl::test
