#pragma once
// InternVL checkpoints, in both namings: the original remote-code layout
// (model_type "internvl_chat": vision_model.*, mlp1.*, language_model.*) and the
// transformers-native one (model_type "internvl": model.vision_tower.*,
// model.multi_modal_projector.*, model.language_model.*, lm_head).
#include <filesystem>
#include <string>

#include "format/model_config.h"

namespace edgevl {

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

}  // namespace edgevl
