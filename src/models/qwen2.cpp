// Qwen2 / Qwen2.5: the Llama layout with a bias on q, k and v (never on o or the MLP).
#include "core/error.h"
#include "models/llama.h"

namespace edgevl::models {

namespace {

class Qwen2 final : public LlmFamily {
 public:
  const char* name() const override { return "qwen2"; }
  std::vector<std::string> model_types() const override { return {"qwen2"}; }
  std::vector<std::string> architectures() const override { return {"Qwen2ForCausalLM"}; }
  FamilyDefaults defaults() const override { return {32768, -1, -1, true, 0}; }
  void read_config(const JsonFields& f, LlmConfig&) const override {
    check(!f.opt_bool("use_sliding_window", false),
          "{}: use_sliding_window is true; edgevl supports only full attention", f.what());
  }
  std::vector<TensorDef> tensors(const LlmConfig& c) const override {
    // Qwen2Attention hard-codes bias=True on q/k/v, False on o: no flag says otherwise.
    return llama_layout_tensors(c, {.qkv_bias = true});
  }
  text::ChatTemplate chat_template(const std::string& hf) const override {
    if (hf.find("You are Qwen, created by Alibaba Cloud.") != std::string::npos)
      return text::chatml_template(
          "qwen2.5", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    return text::chatml_template("chatml", "You are a helpful assistant.");
  }
};

}  // namespace

const LlmFamily& qwen2_family() {
  static const Qwen2 f;
  return f;
}

}  // namespace edgevl::models
