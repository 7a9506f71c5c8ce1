#include "core/dtype.h"

namespace edgevl {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kInfo[] = {
    {DType::F32, "f32", 4},     {DType::F16, "f16", 2}, {DType::BF16, "bf16", 2},
    {DType::Q8, "q8", 0},       {DType::Q4, "q4", 0},   {DType::I32, "i32", 4},
    {DType::BF16P, "bf16p", 0},
};
}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i.name;
  return "unknown";
}

bool dtype_from_name(std::string_view name, DType* out) {
  for (const auto& i : kInfo)
    if (i.name == name) {
      *out = i.type;
      return true;
    }
  return false;
}

size_t dtype_size(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i.size;
  return 0;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return f32_from_bits(sign);
    // Subnormal half: renormalise.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return f32_from_bits(sign | uint32_t(127 - 15 - e) << 23 | mant << 13);
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | mant << 13);
  return f32_from_bits(sign | (exp + 127 - 15) << 23 | mant << 13);
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): shift the implicit-1 mantissa into place, round even.
    if (abs < 0x33000000u) return uint16_t(sign);
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u);  // round to nearest even at bit 13
  r -= 0x38000000u;                                // rebias 127 -> 15
  return uint16_t(sign | (r >> 13));
}

}  // namespace edgevl
