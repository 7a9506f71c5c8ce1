#pragma once
// Element types of tensors, and the scalar conversions every backend agrees on.
#include <cstdint>
#include <cstring>
#include <string_view>

namespace edgevl {

// Values are stored in .evb files: append only, never renumber.
enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  BF16 = 2,
  Q8 = 3,  // int8 per output channel (later issue)
  Q4 = 4,  // int4 per group along the input dim (later issue)
  I32 = 5,
  // bf16 matrix [N][K] stored in the AMX weight layout (backend/cpu/kernels.h
  // pack_bf16_panels): 16-row panels of VNNI-2 pairs, N padded to 16 and K to 32 with zeros.
  BF16P = 6,
};

std::string_view dtype_name(DType t);
bool dtype_from_name(std::string_view name, DType* out);
// Bytes of one element for plain types; 0 for block-quantized types.
size_t dtype_size(DType t);

inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bf16_to_f32(uint16_t h) {
  return f32_from_bits(uint32_t(h) << 16);
}
// Round to nearest even, NaN stays NaN (matches torch's conversion).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even, IEEE half

}  // namespace edgevl
