#pragma once
// Shared pieces of the AMX kernels (quant_amx.cpp, matmul_amx.cpp); include only from files
// compiled with the AMX flags.
//
// The tile config is loaded with inline asm taking the whole 64-byte struct as the memory
// operand: g++ 12's _tile_loadconfig declares only 8 bytes, so the stores filling the rest may
// be dropped and ldtilecfg then faults (SIGILL). Tile loads and stores are asm with a memory
// clobber: g++'s _tile_loadd has none, so stores filling a tile buffer could be moved past it.
#include <cstdint>

namespace edgevl::cpu {

// ldtilecfg operand, palette 1.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Kernels load it at entry and release the tiles at exit: ldtilecfg + tilerelease cost
// ~0.1-0.15 us (measured), noise next to the smallest AMX call (~200 us), and no pool thread
// keeps tile state between calls.
inline void load_tile_config(const TileConfig& c) {
  asm volatile("ldtilecfg %0" ::"m"(c));
}

#define EVL_TILE_LOAD(t, base, stride) \
  asm volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"(int64_t(stride)) : "memory")
#define EVL_TILE_STORE(t, base, stride) \
  asm volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"(int64_t(stride)) : "memory")

}  // namespace edgevl::cpu
