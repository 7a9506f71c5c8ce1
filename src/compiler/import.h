#pragma once
// Step 1 of `compile`: a hub checkpoint directory read through its family (src/models) into
// what the later steps need — configs, tokenizer, chat template, and the plan of every weight
// the graphs read (which checkpoint tensor, transformed how). Every checkpoint tensor is
// accounted for here: one that no rule reads fails the import, naming it.
#include <memory>
#include <string>

#include "compiler/compile.h"
#include "compiler/llm_weights.h"
#include "compiler/qwen3_vl_vision_weights.h"
#include "compiler/vision_weights.h"
#include "format/checkpoint.h"
#include "format/model_config.h"
#include "models/internvl.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace edgevl::compiler {

struct ImportedModel {
  // The mapped checkpoint files: the weight plans below read from them until the binary is
  // written.
  std::unique_ptr<const Checkpoint> checkpoint;
  LlmConfig llm;
  RuntimeConfig runtime;  // embedding_tensor is set when the tensor table exists
  text::TokenizerData tokenizer;
  text::ChatTemplate chat_template;
  models::VlmInfo vlm;  // vlm.is_vlm false for a plain LLM
  LlmWeights llm_weights;
  VisionWeights vision_weights;  // empty for a plain LLM
  // Qwen3-VL's tower (models/qwen3_vl_vision.h), when the config has one; its specs and
  // consumed names are also in vision_weights.
  QwenVisionShape qwen_vision_shape;
  QwenVisionWeights qwen_vision;
};

ImportedModel import_checkpoint(const CompileOptions& o, DType matrix_type,
                                const std::function<void(const std::string&)>& log);

}  // namespace edgevl::compiler
