#pragma once
// The decoder graph's view of a checkpoint: which slot each tensor fills, and per layer the
// tensor-table names of the slots. Shared by the family interface (family.h), which lists the
// tensors, and the blocks (blocks.h), which read them.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace edgevl::models {

// What the decoder graph reads a tensor as. `Fused` tensors are split by the family
// (LlmFamily::split) into several of the others. Not stored anywhere: a block of a new kind adds
// its slots (before Fused, which stays last).
enum class Slot {
  Embedding,
  FinalNorm,
  LmHead,
  AttnNorm,
  Wq,
  Wk,
  Wv,
  Bq,
  Bk,
  Bv,
  QNorm,
  KNorm,
  Wo,
  Bo,
  FfnNorm,
  WGate,
  BGate,
  WUp,
  BUp,
  WDown,
  BDown,
  // Gated attention (Qwen3.5's full-attention layers): the output gate's rows of q_proj.
  WqGate,
  BqGate,  // its bias (attention_bias)
  // Gated DeltaNet (Qwen3.5's linear-attention layers), blocks.h gated_delta_net.
  LinQkv,     // in_proj_qkv [2 hk dk + hv dv, hidden]
  LinZ,       // in_proj_z [hv dv, hidden]: the output norm's gate
  LinB,       // in_proj_b [hv, hidden]: beta
  LinA,       // in_proj_a [hv, hidden]: the decay's input
  LinConv,    // conv1d.weight [2 hk dk + hv dv, 1, taps]
  LinALog,    // A_log [hv]
  LinDtBias,  // dt_bias [hv]
  LinNorm,    // norm.weight [dv]
  LinOut,     // out_proj [hidden, hv dv]
  Fused,
};
inline constexpr size_t kSlotCount = size_t(Slot::Fused) + 1;

// The tensor-table names the decoder graphs read, filled by the importer from the family's
// table: per layer by slot, "" where the table has no such tensor (an absent bias or norm).
struct LayerTensors {
  std::array<std::string, kSlotCount> names;
  const std::string& operator[](Slot s) const { return names[size_t(s)]; }
  std::string& operator[](Slot s) { return names[size_t(s)]; }
};
struct DecoderTensors {
  std::string embedding, final_norm, lm_head;  // lm_head == embedding when tied
  std::string rope_cos, rope_sin;              // computed at load (core/rope_tables.h)
  std::vector<LayerTensors> layers;
};
// The graph values of the RoPE cos / sin tables, which every layer's attention reads.
struct RopeTables {
  int32_t cos = -1, sin = -1;
};

}  // namespace edgevl::models
