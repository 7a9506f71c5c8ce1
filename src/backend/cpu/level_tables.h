#pragma once
// The table pair of a level whose big kernels pay off only from some row count (the 16-bit
// GEMMs, AMX-INT8): the table isa_levels.cpp calls "best" hands them calls of at least
// kMinRows rows, and its test hook ("every row", a hidden level) hands them every call so that
// tests reach them with a few rows. Internal linkage, as the level files that include it are
// each built with their own ISA flags.
#include <cstdint>

namespace edgevl::cpu {
namespace {

// make(1) for every row, make(kMinRows) for the best, each built once.
template <auto make, int64_t kMinRows>
const auto& level_table(bool every_row) {
  static const auto every = make(int64_t{1});
  static const auto best = make(kMinRows);
  return every_row ? every : best;
}

}  // namespace
}  // namespace edgevl::cpu
