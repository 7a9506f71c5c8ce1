// Qwen3-VL's language model (model_type qwen3_vl; the LLM's keys in text_config, model_type
// qwen3_vl_text): dense Qwen3 (per-head q/k RMSNorm with plain weights, explicit head_dim, no
// biases unless attention_bias) whose tensors live under model.language_model.*, with interleaved
// multimodal RoPE. MRoPE splits the head_dim / 2 rotary frequencies between three position axes:
// frequency i takes the height position when i % 3 == 1 and i < 3 * mrope_section[1], the width
// position when i % 3 == 2 and i < 3 * mrope_section[2], else the temporal one. Text tokens have t
// = h = w = their index, so for them MRoPE is exactly plain RoPE.
#include "core/error.h"
#include "models/llama.h"

namespace edgevl::models {

namespace {

using json = nlohmann::json;

class Qwen3Vl final : public LlmFamily {
  static constexpr BoolFlag kAttentionBias{"attention_bias"};  // on q/k/v/o (published: false)

 public:
  // mrope_section of the rope settings: how many rotary frequencies follow the height and the
  // width position (the rest follow the temporal one). Stored as ints in the config's flags.
  static constexpr const char* kMropeH = "mrope_section_h";
  static constexpr const char* kMropeW = "mrope_section_w";

  const char* name() const override { return "qwen3_vl"; }
  std::vector<std::string> model_types() const override { return {"qwen3_vl", "qwen3_vl_text"}; }
  std::vector<std::string> architectures() const override {
    return {"Qwen3VLForConditionalGeneration"};
  }
  // Qwen3VLTextConfig's defaults: max_position_embeddings 128000, head_dim 128.
  FamilyDefaults defaults() const override { return {128000, -1, -1, true, 128}; }
  std::vector<BoolFlag> flags() const override { return {kAttentionBias}; }
  void read_config(const JsonFields& f, LlmConfig& c) const override {
    // transformers 4.57 wrote rope_scaling, 5.x writes rope_parameters: the same keys.
    // Qwen3VLTextRotaryEmbedding takes mrope_section [24, 20, 20] when the key is absent, and
    // clips the sections to the frequencies there are (a slice), so any head_dim works.
    int32_t s[3] = {24, 20, 20};
    const char* key = f.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
    if (const json* rs = f.opt_object(key)) {
      const JsonFields r(*rs, f.what() + " " + key);
      if (const json* sec = r.opt("mrope_section")) {
        check(sec->is_array() && sec->size() == 3,
              "{}: mrope_section must be a list of 3 integers (t, h, w frequencies), got {}",
              r.what(), sec->dump());
        for (size_t i = 0; i < 3; ++i) {
          check((*sec)[i].is_number_integer() && (*sec)[i].get<int32_t>() >= 0,
                "{}: mrope_section {} must hold non-negative integers", r.what(), sec->dump());
          s[i] = (*sec)[i].get<int32_t>();
        }
      }
      // mrope_interleaved is not read: transformers' Qwen3-VL always interleaves.
    }
    c.flags.set(kMropeH, s[1]);
    c.flags.set(kMropeW, s[2]);
  }
  std::vector<TensorDef> tensors(const LlmConfig& c) const override {
    std::vector<TensorDef> t = llama_layout_tensors(
        c, {.qkv_bias = kAttentionBias(c), .o_bias = kAttentionBias(c), .qk_norm = true});
    // Qwen3VLForConditionalGeneration holds its Qwen3 under model.language_model.
    for (TensorDef& d : t)
      if (d.name.rfind("model.", 0) == 0) d.name = "model.language_model." + d.name.substr(6);
    return t;
  }
  text::ChatTemplate chat_template(const std::string&) const override {
    // Qwen3-VL's template: ChatML, no default system message, no think block.
    return text::chatml_template("qwen3_vl", "");
  }
};

}  // namespace

const LlmFamily& qwen3_vl_family() {
  static const Qwen3Vl f;
  return f;
}

}  // namespace edgevl::models
