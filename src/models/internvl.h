#pragma once
// InternVL (2, 2.5, 3, 3.5): an InternViT tower, pixel shuffle and an MLP projector in front
// of an LLM of any family (Qwen2, Qwen2.5, InternLM2, Qwen3, ...). Checkpoints come in two
// namings: the original remote-code layout (model_type "internvl_chat": vision_model.*,
// mlp1.*, language_model.*) and the transformers-native one (model_type "internvl":
// model.vision_tower.*, model.multi_modal_projector.*, model.language_model.*, lm_head).
// This file holds what the wrapper adds: its config, where the LLM's tensors live, and the
// conversation templates of InternVL's conversation.py.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "format/model_config.h"
#include "models/synth_arch.h"
#include "text/chat_template.h"

namespace edgevl::models {

bool is_internvl_model_type(const std::string& model_type);

// The LLM config inside a wrapper config.json; nullopt for a plain LLM config.
struct WrappedLlmConfig {
  const nlohmann::json* json;
  std::string what;                    // for errors: "/m/config.json llm_config"
  std::optional<bool> tie_embeddings;  // the wrapper's word on tying, when it has one
};
std::optional<WrappedLlmConfig> internvl_llm_config(const nlohmann::json& config,
                                                    const std::string& what);

enum class VlmNaming { Original, TransformersNative };

struct VlmInfo {
  bool is_vlm = false;
  VlmNaming naming = VlmNaming::Original;
  VisionConfig vision;        // token ids are filled in from the tokenizer by the compiler
  int32_t vision_layers = 0;  // layers in the checkpoint (vision.n_layers may run fewer)
  bool vision_qkv_bias = true;
  std::string template_name;  // InternVL conversation template ("Hermes-2", ...) or ""
};

// Reads DIR/config.json; is_vlm is false for a plain LLM. Unsupported vision settings
// (qk-norm, RMSNorm towers, pixel shuffle v1) are refused naming the key.
VlmInfo load_vlm_info(const std::filesystem::path& dir);

// Where the LLM's tensors live: a plain LLM's "model.x" is `body` + "x", its lm_head is
// `head` + "lm_head.weight".
struct LlmNaming {
  std::string body = "model.";
  std::string head;
  std::string rename(const std::string& plain_llm_name) const;
};
LlmNaming llm_naming(const VlmInfo& info);
// The LLM as the transformers-native conversions hold it: untied, and an InternLM2 LLM rewritten
// as Llama (separate q/k/v, no biases), as the hub's -hf repos do.
LlmConfig hf_conversion_llm(const LlmConfig& c);

// The conversation template: config.json's `template` when present; transformers-native
// configs carry none, so it is inferred from the LLM family and the Jinja template.
// Throws for a name InternVL does not define.
text::ChatTemplate internvl_template(const VlmInfo& info, const std::string& llm_family,
                                     const std::string& hf_template, const std::string& what);

// `edgevl synth`'s InternVL archs (internvl_synth.cpp): internvl2-1b, internvl2-2b,
// internvl2.5-1b, internvl3.5-1b, internvl3.5-2b.
std::vector<SynthArch> internvl_synth_archs();

// InternVL conversation templates by their config.json name ("Hermes-2", "internlm2-chat",
// "internvl2_5"); false for an unknown name.
bool internvl_chat_template(const std::string& name, text::ChatTemplate* out);

}  // namespace edgevl::models
