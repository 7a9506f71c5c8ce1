#pragma once
// Weight-type presets and how each tensor is stored under them.
//   f32 / f16 / bf16  every matrix in that type
//   w8a8              projections Q8 (per output channel), int8 activations per token
//   w4a8              projections Q4 (groups along the input dim), int8 activations
//   w4a16             projections Q4, float activations
// Protections: token embeddings and lm_head never go below Q8 (the head takes the preset's
// activations: int8 under w8a8 / w4a8, see assign_storage); norms, biases and tables stay f32.
// Vision tower (InternViT + projector) under the integer presets: bf16, with its attention
// matmuls in bf16 too (runtime/execution/executor.cpp). Measured on the InternViT-300M synth shape
// (random weights, one 448x448 tile, LLM in f32) against an all-f32 tower: vision embeddings
// SQNR f16 67.8 dB, bf16 49.8 dB, Q8A8 28.8 dB, Q4A8 10.2 dB; next-token KL 3.6e-8, 2.8e-6,
// 1.2e-4, 1.6e-2. Q4 is out; Q8A8 costs 20 dB more than bf16 for a modest speed gain with
// AMX, and trained ViTs have activation outliers random weights lack. bf16 runs on AMX-BF16
// or AVX512-BF16 (or AVX-512 with f32 activations elsewhere). `--quant f16` keeps the tower in f16.
// `--vision-quant w8a8` (compile) stores the encoder layers' projections (q, k, v, attention
// output, fc1, fc2) in Q8 with int8 activations per token instead, for CPUs whose int8 dot
// products are several times their bf16 rate; the patch embedding and the projector (mlp1)
// stay bf16, LayerNorms / softmax / GELU float, and the attention matmuls bf16. Those int8
// projections are stored rotated (as the LLM's, below) against trained ViTs' outlier channels.
// It stays opt-in on every CPU: under emulated outliers it keeps a cosine of 0.995 to f32
// where the bf16 tower keeps 0.99998 (bench/results/2026-12-05-vision-int8-outliers.md).
#include <string>

#include "compiler/llm_weights.h"
#include "format/evb.h"

namespace edgevl::compiler {

struct QuantPreset {
  std::string name;
  DType matrix = DType::F16;          // LLM projections
  DType embedding = DType::F16;       // token embeddings / lm_head
  DType vision = DType::F16;          // vision tower and projector matrices
  DType vision_encoder = DType::F16;  // the encoder layers' projections (vision_quant)
  bool act8 = false;
  bool vision_act8 = false;  // int8 activations for the vision encoder's projections
  // The LLM's int8 / int4 matrices rotated by block Hadamard matrices along their input
  // (TensorEntry::rotation): on for w8a8, w4a8 and w4a16 (the int8 tower's: with vision_act8).
  bool rotate = false;
  int group = 32;
  bool zero_point = false;
  bool quantized() const { return matrix == DType::Q8 || matrix == DType::Q4; }
};

// Throws listing the presets for an unknown name or a bad group size. vision_quant: "" (the
// preset's choice), f32, f16, bf16 or w8a8 (the vision tower's storage, see above).
QuantPreset parse_quant_preset(const std::string& name, int group = 32, bool zero_point = false,
                               const std::string& vision_quant = "");

// Where a weight sits: the LLM, the vision encoder's layers, or the rest of the vision tower
// (patch embedding, projector).
enum class WeightPlace { Llm, VisionEncoder, VisionOther };

// Sets dtype / group / zero_point / act8 / rotation and bytes of `e` (name and shape already
// set).
void assign_storage(const QuantPreset& p, WeightRole role, WeightPlace place, TensorEntry& e);

// Writes `src` (e.numel() floats, row-major [out, in]) in e's storage format.
void store_tensor(const float* src, const TensorEntry& e, uint8_t* out);

}  // namespace edgevl::compiler
