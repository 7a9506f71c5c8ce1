#pragma once
// The KV cache's memory layout, defined once: the session allocates by it, the CPU dispatcher
// finds the int8 scales by it, and `inspect` / `bench` count bytes by it.
//
// One cache is the K (or the V) of one layer, for `capacity` tokens:
//   f32 / f16:  elements [n_kv_heads][capacity][head_dim]
//   q8:         int8     [n_kv_heads][capacity][head_dim]   symmetric, q = round(x / scale)
//               then, at the next 64-byte boundary,
//               f32      [n_kv_heads][capacity]             scale = max|x| / 127 of that row
// A q8 row is one (token, kv head): each new token gets its own scale, so nothing already in
// the cache is requantized when later tokens have larger values.
//
// Scales are f32, not f16: 4 bytes next to head_dim (>= 64) int8 bytes is <= 6% of the row
// (f16 would save 3% of the cache), and an f32 scale needs no conversion in the attention loop
// and cannot underflow/overflow for tiny or huge rows.
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace edgevl {

// Types the KV cache can be stored in (DType::Q8 means the per (token, head) layout above).
inline bool kv_type_supported(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::Q8;
}

struct KvLayout {
  DType type = DType::F16;
  int64_t n_kv_heads = 0, head_dim = 0, capacity = 0;

  size_t elem_bytes() const { return type == DType::Q8 ? 1 : dtype_size(type); }
  // Bytes of the element block [n_kv_heads][capacity][head_dim].
  size_t data_bytes() const {
    return size_t(n_kv_heads) * size_t(capacity) * size_t(head_dim) * elem_bytes();
  }
  // Offset of the f32 scales (q8 only).
  size_t scale_offset() const { return (data_bytes() + 63) / 64 * 64; }
  // Bytes of one cache (K or V of one layer), a multiple of 64 so caches can be packed.
  size_t cache_bytes() const {
    const size_t scales = type == DType::Q8 ? size_t(n_kv_heads) * size_t(capacity) * 4 : 0;
    return (scale_offset() + scales + 63) / 64 * 64;
  }
  // Bytes one token adds to one cache (what attention streams per token and cache).
  double token_bytes() const {
    return double(n_kv_heads) *
           (double(head_dim) * double(elem_bytes()) + (type == DType::Q8 ? 4.0 : 0.0));
  }
  const float* scales(const void* cache) const {
    return reinterpret_cast<const float*>(static_cast<const uint8_t*>(cache) + scale_offset());
  }
  float* scales(void* cache) const {
    return reinterpret_cast<float*>(static_cast<uint8_t*>(cache) + scale_offset());
  }
};

}  // namespace edgevl
