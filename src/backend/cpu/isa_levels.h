#pragma once
// Internal: the CPU backend's ISA levels, listed in one place (isa_levels.cpp). A level names
// the CPU features it needs and the two kernel tables it runs (float kernels: kernel_table.h;
// quantized matmuls: quant_table.h). The dispatchers read the active level's tables; the
// public selection functions (select_isa, force_isa in kernels.h) switch both at once.
// Adding a level is one entry in that list plus the files that fill its tables.
#include <span>

namespace edgevl::cpu {

struct KernelTable;
struct QuantTable;

struct IsaLevel {
  const char* name;  // "avx512-bf16": what --isa and EDGEVL_ISA take
  const char* what;  // one line for people: the instructions its GEMMs are built on
  // The CPU features its files are compiled for: those of level `base` (null: none) plus
  // `adds` (space-separated, as cpu_features_string() names them).
  const char* base;
  const char* adds;
  const KernelTable& (*kernels)();
  const QuantTable& (*quant)();
  bool hidden = false;  // a test hook, not a user-visible level (never chosen as "best")
};

// Every level this build knows, lowest first (the order "best" searches from the top).
std::span<const IsaLevel> isa_level_list();
// The tables of the active level (the default level until select_isa / force_isa changes it).
const KernelTable& active_kernels();
const QuantTable& active_quant();

}  // namespace edgevl::cpu
