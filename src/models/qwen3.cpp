// Qwen3 (dense): the Llama layout with an RMSNorm over each head of q and of k between the
// projection and RoPE (q_norm / k_norm, weights [head_dim], eps = rms_norm_eps), an explicit
// head_dim (128 in every published size, and Qwen3Config's default), biases on q/k/v/o only
// when attention_bias is set, and no MLP bias.
#include "core/error.h"
#include "models/llama.h"

namespace edgevl::models {

namespace {

class Qwen3 final : public LlmFamily {
  static constexpr BoolFlag kAttentionBias{"attention_bias"};  // on q/k/v/o

 public:
  const char* name() const override { return "qwen3"; }
  std::vector<std::string> model_types() const override { return {"qwen3"}; }
  std::vector<std::string> architectures() const override { return {"Qwen3ForCausalLM"}; }
  FamilyDefaults defaults() const override { return {32768, -1, -1, true, 128}; }
  std::vector<BoolFlag> flags() const override { return {kAttentionBias}; }
  void read_config(const JsonFields& f, LlmConfig&) const override {
    check(!f.opt_bool("use_sliding_window", false),
          "{}: use_sliding_window is true; edgevl supports only full attention", f.what());
    if (const nlohmann::json* lt = f.opt("layer_types"); lt && lt->is_array())
      for (const auto& t : *lt)
        check(t.is_string() && t.get<std::string>() == "full_attention",
              "{}: layer_types holds {}; edgevl supports only full_attention layers", f.what(),
              t.dump());
  }
  std::vector<TensorDef> tensors(const LlmConfig& c) const override {
    return llama_layout_tensors(
        c, {.qkv_bias = kAttentionBias(c), .o_bias = kAttentionBias(c), .qk_norm = true});
  }
  text::ChatTemplate chat_template(const std::string&) const override {
    // ChatML without a default system message. With thinking on (the template's default),
    // the generation prompt is just "<|im_start|>assistant\n".
    return text::chatml_template("qwen3", "");
  }
};

}  // namespace

const LlmFamily& qwen3_family() {
  static const Qwen3 f;
  return f;
}

}  // namespace edgevl::models
