#pragma once
// Weight-type presets and how each tensor is stored under them.
//   f32 / f16 / bf16  every matrix in that type
//   w8a8              projections Q8 (per output channel), int8 activations per token
//   w4a8              projections Q4 (groups along the input dim), int8 activations
//   w4a16             projections Q4, float activations
// Protections: token embeddings and lm_head never go below Q8 and keep float activations (A16);
// norms, biases and tables stay f32; the vision tower stays f16 under the integer presets (measured
// per-layer error for the tower is still to come: see the quantization issue).
#include <string>

#include "compiler/llm_weights.h"
#include "format/evb.h"

namespace edgevl::compiler {

struct QuantPreset {
  std::string name;
  DType matrix = DType::F16;     // LLM projections
  DType embedding = DType::F16;  // token embeddings / lm_head
  DType vision = DType::F16;     // vision tower and projector matrices
  bool act8 = false;
  int group = 32;
  bool zero_point = false;
  bool quantized() const { return matrix == DType::Q8 || matrix == DType::Q4; }
};

// Throws listing the presets for an unknown name or a bad group size.
QuantPreset parse_quant_preset(const std::string& name, int group = 32, bool zero_point = false);

// Sets dtype / group / zero_point / act8 and bytes of `e` (name and shape already set).
void assign_storage(const QuantPreset& p, WeightRole role, bool vision, TensorEntry& e);

// Writes `src` (e.numel() floats, row-major [out, in]) in e's storage format.
void store_tensor(const float* src, const TensorEntry& e, uint8_t* out);

}  // namespace edgevl::compiler
