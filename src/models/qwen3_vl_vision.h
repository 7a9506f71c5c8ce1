#pragma once
// Qwen3-VL's vision tower (Qwen3VLVisionModel), also Qwen3.5's (Qwen3_5VisionModel: the same
// without DeepStack): its shape (read from config.json's
// vision_config into the LLM config's flags, so the binary needs no new section), the
// checkpoint tensors it reads and the graph over one image of up to `max_patches` patches.
//
// The graph (width = max_patches; an image of N patches runs N valid rows, in merge-block
// order as the processor emits them):
//   pixels [N, 3*T*P*P] -> patch matmul (the Conv3d) + "vision.pos_embed" rows (the runtime's
//   bilinear interpolation of the learned table, align_corners) -> blocks: x += proj(attn(
//   rope2d(q), rope2d(k), v)) over LN1(x); x += fc2(gelu_tanh(fc1(LN2(x)))) -> after block
//   deepstack[k]: view [N/4, 4C] -> LN(4C) -> fc1 -> gelu(erf) -> fc2; at the end: LN(C) ->
//   view [N/4, 4C] -> fc1 -> gelu(erf) -> fc2. Output: [max_patches/4, out * (1 + K)], the
//   merger's rows then each DeepStack feature's, side by side.
// The 2D rotary is the Rope op in its contiguous-sections mode (RopeAttrs): the first half of
// the head's frequencies follow the patch row, the second half its column, from a table
// [rope_rows][head_dim / 2] whose column f holds the angle of frequency f mod (head_dim / 4).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "format/json_fields.h"
#include "format/model_config.h"
#include "format/qwen_vision_config.h"
#include "graph/graph.h"
#include "graph/graph_builder.h"

namespace edgevl::models {

// vision_config -> flags of `c` (names "vision.*"); refuses what the graph does not implement.
// `deepstack`: the tower has DeepStack mergers (Qwen3-VL: deepstack_visual_indexes, default
// [8, 16, 24]); Qwen3.5's tower (Qwen3_5VisionModel) is the same without them.
void read_qwen_vision_config(const JsonFields& vision_config, LlmConfig& c, bool deepstack);

// Tensor-table names the graph reads (the compiler fills them: q, k, v cut from qkv, the patch
// embedding flattened to [C, 3*T*P*P], the position table and the rotary tables).
struct QwenVisionTensors {
  std::string patch_w, patch_b, rope_cos, rope_sin;
  struct Block {
    std::string n1w, n1b, wq, bq, wk, bk, wv, bv, wo, bo, n2w, n2b, fc1w, fc1b, fc2w, fc2b;
  };
  std::vector<Block> blocks;
  struct Merger {
    std::string nw, nb, fc1w, fc1b, fc2w, fc2b;
  };
  Merger merger;
  std::vector<Merger> deepstack;
};

// The checkpoint's vision tensors (model.visual.*) and their shapes as stored, in model order:
// what `synth` writes (the compiler's import checks the same names and shapes as it reads them).
struct QwenVisionCheckpointTensor {
  std::string name;
  std::vector<int64_t> shape;
};
std::vector<QwenVisionCheckpointTensor> qwen_vision_checkpoint_tensors(const QwenVisionShape& s);

Graph qwen3_vl_vision_graph(const QwenVisionShape& s, const QwenVisionTensors& t,
                            const TensorIndex& index);

// `synth` for the Qwen-VL families: the image processor as believed published (Qwen3-VL's:
// mean = std = 0.5, 64K to 16M pixels), and the tokenizer_config.json edit that puts the vision
// specials at their ids (the generated vocabulary has no pieces there) so image prompts tokenize.
nlohmann::ordered_json qwen_vl_synth_preprocessor();
std::function<void(nlohmann::ordered_json&)> qwen_vl_synth_specials(
    std::vector<std::pair<int, std::string>> id_text);

}  // namespace edgevl::models
