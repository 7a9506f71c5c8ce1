#pragma once
// The import of Qwen3-VL's vision tower (models/qwen3_vl_vision.h: its shape and graph). Weight
// transforms done here, once: the Conv3d patch embedding becomes a [C, 3*T*P*P] matmul (the
// same floats: its input rows are (c, t, y, x) like the kernel); the fused qkv projection and
// bias are cut into q, k, v; the 2D rotary tables are computed (RoPE's float32 angles).
#include <set>
#include <string>

#include "compiler/llm_weights.h"
#include "format/checkpoint.h"
#include "models/qwen3_vl_vision.h"

namespace edgevl::compiler {

struct QwenVisionWeights {
  std::vector<WeightSpec> specs;
  models::QwenVisionTensors tensors;  // what the vision graph reads
  std::string pos_table;              // the learned position table, [side^2, C] (the runtime's)
  std::set<std::string> consumed;     // checkpoint names read
};

QwenVisionWeights plan_qwen3_vl_vision(const Checkpoint& ckpt, const QwenVisionShape& s);

}  // namespace edgevl::compiler
