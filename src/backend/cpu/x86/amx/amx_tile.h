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

// The bf16 GEMM kernels' block of MR x NP accumulators C[i][j] = tmm 2i+j, A tiles (rows
// 0-15 / 16-31) in tmm4/5 and B tiles (panels 0 / 1) in tmm6/7, 1 KB tiles of row stride 64.
// With A in place: load the B pair and add every A_i B_j.
template <int MR, int NP>
inline void bf16_block_load_b(const uint16_t* b0, const uint16_t* b1) {
  EVL_TILE_LOAD(6, b0, 64);
  _tile_dpbf16ps(0, 4, 6);
  if constexpr (MR == 2) _tile_dpbf16ps(2, 5, 6);
  if constexpr (NP == 2) EVL_TILE_LOAD(7, b1, 64);
  if constexpr (NP == 2) _tile_dpbf16ps(1, 4, 7);
  if constexpr (MR == 2 && NP == 2) _tile_dpbf16ps(3, 5, 7);
}
// With B in place: load the A pair and add every A_i B_j.
template <int MR, int NP>
inline void bf16_block_load_a(const uint16_t* a0, const uint16_t* a1) {
  EVL_TILE_LOAD(4, a0, 64);
  _tile_dpbf16ps(0, 4, 6);
  if constexpr (NP == 2) _tile_dpbf16ps(1, 4, 7);
  if constexpr (MR == 2) EVL_TILE_LOAD(5, a1, 64);
  if constexpr (MR == 2) _tile_dpbf16ps(2, 5, 6);
  if constexpr (MR == 2 && NP == 2) _tile_dpbf16ps(3, 5, 7);
}
// The three products a split k step adds after hi x hi (A and B hi tiles in place; lo parts
// `a_lo` / `b_lo` elements on): hi x lo, lo x lo, lo x hi.
template <int MR, int NP>
inline void bf16_block_split_rest(const uint16_t* a0, const uint16_t* a1, int64_t a_lo,
                                  const uint16_t* b0, const uint16_t* b1, int64_t b_lo) {
  bf16_block_load_b<MR, NP>(b0 + b_lo, b1 + b_lo);
  bf16_block_load_a<MR, NP>(a0 + a_lo, a1 + a_lo);
  bf16_block_load_b<MR, NP>(b0, b1);
}

}  // namespace edgevl::cpu
