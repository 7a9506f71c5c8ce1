#pragma once
// A Qwen3-VL or Qwen3.5 image prompt, as Qwen3VLProcessor + the chat template make it, evaluated
// into a session: one user turn of images (each <|vision_start|><|image_pad|> x tokens
// <|vision_end|>, Qwen3-VL's template puts them before the text) and text; each image through
// the processor (settings stored in the binary by the compiler) and the vision tower; 3D
// positions and DeepStack features. The front ends (run, chat, serve, the C API) take images
// through conversation.h and runtime/execution/image_processor.h instead; this single-turn path
// stays as an independent implementation the conversation path is tested against
// (qwen3vl_conversation_test).
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/execution/session.h"

namespace edgevl {

struct QwenVlTurn {
  std::vector<int32_t> ids;  // the whole prompt
  int32_t images = 0, image_tokens = 0;
  double preprocess_ms = 0, vision_ms = 0;
};

// Renders and tokenizes the turn, encodes the images and evaluates every prompt token but the
// last into `s` (which must be empty): generate(s, ids, ..., reused = ids.size() - 1) then
// evaluates the last one at its position and samples the reply. Throws for a model without a
// Qwen3-VL tower or an image it cannot take.
// `thinking`: false renders the template's reply prefix with thinking off (Qwen3.5's closed
// think block; templates without one ignore it).
QwenVlTurn qwen_vl_prefill(Session& s, const std::vector<std::filesystem::path>& images,
                           const std::string& text, const std::string& system = "",
                           bool thinking = true);

}  // namespace edgevl
