#pragma once
// The model's architecture facts: one struct, filled by the compiler from config.json,
// stored in the .evb, read back by the runtime. Serialized by one visitor with tagged,
// append-only fields so old readers skip tags they do not know.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/byte_io.h"
#include "core/dtype.h"

namespace edgevl {

// Settings only some families have (Llama's attention_bias, InternLM2's bias, ...), by name in
// the family's config.json vocabulary, each an int (a bool is 0 / 1) or a float. A family
// declares and reads its own (src/models/<family>.cpp), so LlmConfig does not grow a field per
// family flag, and the binary stores them as one list (model_config.cpp).
class FamilyFlags {
 public:
  using Value = std::variant<int32_t, float>;
  struct Flag {
    std::string name;
    Value value;
    bool operator==(const Flag&) const = default;
  };
  void set(std::string_view name, Value v);  // adds or replaces
  // The flag's value, `dflt` when absent; throws when it holds the other type.
  int32_t get_int(std::string_view name, int32_t dflt) const;
  float get_float(std::string_view name, float dflt) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }
  const std::vector<Flag>& items() const { return items_; }
  void clear() { items_.clear(); }
  bool operator==(const FamilyFlags&) const = default;

 private:
  const Flag* find(std::string_view name) const;
  template <class T>
  T get(std::string_view name, T dflt) const;
  std::vector<Flag> items_;
};

struct LlmConfig {
  // The model family (src/models/<family>.cpp): "llama", "qwen2", "qwen3", "internlm2", ...
  std::string family;
  int32_t vocab_size = 0;
  int32_t hidden = 0;  // d_model
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;    // usually hidden / n_heads
  int32_t ffn = 0;         // intermediate size of the SwiGLU MLP
  float norm_eps = 1e-6f;  // RMSNorm epsilon
  float rope_theta = 10000.f;
  int32_t max_position = 0;  // max_position_embeddings of the checkpoint
  // The LM head is the embedding matrix (tie_word_embeddings: every family may tie).
  bool tie_embeddings = false;
  FamilyFlags flags;  // the family's own settings
  // Token ids from config.json (-1 when absent); the tokenizer's own ids take precedence.
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  std::vector<int32_t> extra_eos_ids;  // e.g. generation_config eos lists
};

// The vision side of a VLM (InternVL: InternViT tower, pixel shuffle, mlp1 projector) and
// the image preprocessing and prompt facts the runtime needs.
struct VisionConfig {
  int32_t image_size = 448;
  int32_t patch_size = 14;
  int32_t hidden = 0;
  int32_t n_layers = 0;  // layers actually run (select_layer already applied)
  int32_t n_heads = 0;
  int32_t ffn = 0;
  float norm_eps = 1e-6f;       // LayerNorm eps of the tower
  float proj_norm_eps = 1e-5f;  // mlp1.0 LayerNorm eps
  int32_t shuffle = 2;          // 1 / downsample_ratio
  int32_t llm_hidden = 0;
  int32_t min_tiles = 1;
  int32_t max_tiles = 12;
  bool use_thumbnail = true;
  int32_t img_start_id = -1;    // <img>
  int32_t img_end_id = -1;      // </img>
  int32_t img_context_id = -1;  // <IMG_CONTEXT>
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};

  int32_t grid() const { return image_size / patch_size; }
  int32_t tokens_per_tile() const { return (grid() / shuffle) * (grid() / shuffle); }
};

// Compile-time shapes of the runtime graphs.
struct RuntimeConfig {
  int32_t context = 0;            // tokens of KV cache compiled in
  int32_t prefill_chunk = 0;      // tokens per prefill execution
  DType kv_type = DType::F16;     // element type of the KV cache
  int32_t embedding_tensor = -1;  // tensor-table index of the token embeddings (host lookup)
};

void write_config(ByteWriter& w, const LlmConfig& c);
LlmConfig read_llm_config(ByteReader& r);
void write_config(ByteWriter& w, const RuntimeConfig& c);
void write_config(ByteWriter& w, const VisionConfig& c);
VisionConfig read_vision_config(ByteReader& r);
RuntimeConfig read_runtime_config(ByteReader& r);

}  // namespace edgevl
