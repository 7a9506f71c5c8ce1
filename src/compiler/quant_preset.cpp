#include "compiler/quant_preset.h"

#include <cstring>
#include <vector>

#include "backend/cpu/bf16_panels.h"
#include "backend/cpu/hadamard.h"
#include "backend/cpu/quant.h"
#include "core/error.h"

namespace edgevl::compiler {

QuantPreset parse_quant_preset(const std::string& name, int group, bool zero_point,
                               const std::string& vision_quant) {
  check(group == 32 || group == 64 || group == 128, "--group {} must be 32, 64 or 128", group);
  QuantPreset p;
  p.name = name;
  p.group = group;
  p.zero_point = zero_point;
  DType plain;
  if (dtype_from_name(name, &plain) &&
      (plain == DType::F32 || plain == DType::F16 || plain == DType::BF16)) {
    p.matrix = p.embedding = p.vision = plain;
  } else if (name == "w8a8") {
    p.matrix = p.embedding = DType::Q8;
    p.act8 = p.rotate = true;
  } else if (name == "w4a8") {
    p.matrix = DType::Q4;
    p.embedding = DType::Q8;
    p.act8 = p.rotate = true;
  } else if (name == "w4a16") {
    p.matrix = DType::Q4;
    p.embedding = DType::Q8;
    p.rotate = true;
  } else {
    fail("unknown --quant '{}': choose f32, f16, bf16, w8a8, w4a8 or w4a16", name);
  }
  // Integer presets store the vision tower in bf16 (see quant_preset.h for the measurement).
  if (p.quantized()) p.vision = DType::BF16;
  if (vision_quant == "w8a8") {
    p.vision = DType::BF16;
    p.vision_encoder = DType::Q8;
    p.vision_act8 = true;
    return p;
  }
  if (!vision_quant.empty()) {
    DType t;
    check(dtype_from_name(vision_quant, &t) &&
              (t == DType::F32 || t == DType::F16 || t == DType::BF16),
          "unknown --vision-quant '{}': choose f32, f16, bf16 or w8a8", vision_quant);
    p.vision = t;
  }
  p.vision_encoder = p.vision;
  return p;
}

void assign_storage(const QuantPreset& p, WeightRole role, WeightPlace place, TensorEntry& e) {
  const bool vision = place != WeightPlace::Llm;
  switch (role) {
    case WeightRole::Embedding:
    case WeightRole::LmHead: e.dtype = p.embedding; break;
    case WeightRole::Linear:
      e.dtype = place == WeightPlace::VisionEncoder ? p.vision_encoder
                : vision                            ? p.vision
                                                    : p.matrix;
      // The vision tower's matmuls always run 1025 (or 256) rows: bf16 there is stored in the
      // layout the AMX-BF16 GEMM reads, which VDPBF16PS (AVX512-BF16) reads in place too
      // (kernels without either unpack it per call instead).
      if (vision && e.dtype == DType::BF16) e.dtype = DType::BF16P;
      break;
    case WeightRole::Norm:
    case WeightRole::Bias:
    case WeightRole::Constant: e.dtype = DType::F32; break;
  }
  const bool q = e.dtype == DType::Q8 || e.dtype == DType::Q4;
  // The LM head takes int8 activations under the A8 presets too. With float activations it is
  // dequantize + FMA work that grows with every row a step carries (decode batches, speculative
  // verification: B = 8 aggregate 4.3x -> 5.7x of B = 1, k = 8 verification 2.05x -> 1.36x of
  // a decode step, Zen 5) and 3/4 of an AArch64 dotprod decode token's instructions. Its cost
  // (quant-report on stories260k, 201 tokens): w8a8 mean KL 0.00084 -> 0.00105, top-1 98.5 ->
  // 98.0 %; w4a8 KL 0.0717 -> 0.0721. `"act8": false` in --overrides keeps it in float.
  e.act8 = q && (vision ? p.vision_act8 : p.act8);
  // A block Hadamard rotation of the input (backend/cpu/hadamard.h) spreads outlier channels:
  // per-token int8 activations no longer spend their range on one channel, and Q4 groups no
  // longer on one weight: bench/results/2026-12-05-quant-rotation.md. The int8 tower's
  // projections are rotated too: with the outlier channels of trained ViTs (emulated by
  // tools/vision_outlier_stress.py) its embeddings' cosine to f32 fell to 0.944 unrotated and
  // 0.995 rotated (bench/results/2026-12-05-vision-int8-outliers.md).
  const bool rotate = vision ? p.vision_act8 : p.rotate;
  e.rotation = q && rotate ? uint16_t(cpu::hadamard_block_for(e.shape[1])) : 0;
  e.group = e.dtype == DType::Q4 ? uint16_t(p.group) : 0;
  e.zero_point = e.dtype == DType::Q4 && p.zero_point;
  e.bytes = e.expected_bytes();
}

void store_tensor(const float* src, const TensorEntry& e, uint8_t* out) {
  const int64_t n = e.numel();
  switch (e.dtype) {
    case DType::F32: std::memcpy(out, src, size_t(n) * 4); return;
    case DType::F16: {
      auto* o = reinterpret_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* o = reinterpret_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::BF16P: {
      std::vector<uint16_t> rows(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) rows[size_t(i)] = f32_to_bf16(src[i]);
      cpu::pack_bf16_panels(rows.data(), e.shape[0], e.shape[1], reinterpret_cast<uint16_t*>(out));
      return;
    }
    case DType::Q8:
    case DType::Q4: {
      std::vector<float> rotated;
      if (e.rotation) {
        rotated.assign(src, src + n);
        cpu::hadamard_rows(rotated.data(), e.shape[0], e.shape[1], e.rotation);
        src = rotated.data();
      }
      if (e.dtype == DType::Q8)
        cpu::q8_pack(src, e.shape[0], e.shape[1], out);
      else
        cpu::q4_pack(src, e.shape[0], e.shape[1], e.group, e.zero_point, out);
      return;
    }
    default: fail("internal: cannot store type {}", dtype_name(e.dtype));
  }
}

}  // namespace edgevl::compiler
