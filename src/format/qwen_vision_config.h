#pragma once
// The shape of Qwen3-VL's vision tower as a compiled binary keeps it: ints in the LLM config's
// flags ("vision.*"), written by models/qwen3_vl_vision.cpp from config.json's vision_config
// and read by the compiler and the runtime (which runs the tower's graph).
#include <cstdint>
#include <string>
#include <vector>

#include "format/model_config.h"

namespace edgevl {

struct QwenVisionShape {
  int32_t depth = 0, hidden = 0, heads = 0, ffn = 0, patch = 16, temporal = 2, merge = 2;
  int32_t out = 0, pos_side = 0;   // out_hidden_size; sqrt(num_position_embeddings)
  std::vector<int32_t> deepstack;  // vision blocks whose output feeds a DeepStack merger
  int32_t max_patches = 0;         // the graph's width (compile time)
  int32_t head_dim() const { return hidden / heads; }
  int32_t row_values() const { return 3 * temporal * patch * patch; }
  // Rows of the rotary table: patch rows / columns an image of max_patches can have.
  int32_t rope_rows() const { return max_patches / merge + 1; }
  bool present() const { return depth > 0; }
};

// The shape stored in `c`'s flags (depth 0: none). Inline: the runtime library holds no
// format sources but the container's.
inline QwenVisionShape qwen_vision_shape(const LlmConfig& c) {
  QwenVisionShape s;
  const auto& f = c.flags;
  s.depth = f.get_int("vision.depth", 0);
  if (s.depth == 0) return s;
  s.hidden = f.get_int("vision.hidden", 0);
  s.heads = f.get_int("vision.heads", 1);
  s.ffn = f.get_int("vision.ffn", 0);
  s.patch = f.get_int("vision.patch", 0);
  s.temporal = f.get_int("vision.temporal", 0);
  s.merge = f.get_int("vision.merge", 0);
  s.out = f.get_int("vision.out", 0);
  s.pos_side = f.get_int("vision.pos_side", 0);
  s.max_patches = f.get_int("vision.max_patches", 0);
  for (int32_t k = 0; k < f.get_int("vision.deepstack", 0); ++k)
    s.deepstack.push_back(f.get_int("vision.deepstack." + std::to_string(k), 0));
  return s;
}

inline void set_qwen_vision_max_patches(LlmConfig& c, int32_t max_patches) {
  c.flags.set("vision.max_patches", max_patches);
}

}  // namespace edgevl
