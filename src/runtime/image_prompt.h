#pragma once
// A chat turn with images, prepared the way InternVLChatModel.chat() does it: `<image>`
// placeholders (prepended when absent), each expanded to <img><IMG_CONTEXT>x(256*tiles)</img>
// after the template is rendered, and the projector outputs spliced into the embeddings of
// the <IMG_CONTEXT> positions, in order.
#include <string>
#include <vector>

#include "runtime/session.h"
#include "vision/preprocess.h"

namespace edgevl {

struct ImagePrompt {
  std::vector<int32_t> ids;
  std::vector<float> embeds;  // [ids.size(), hidden] with the images spliced in
  int32_t images = 0;
  int32_t tiles = 0;  // thumbnails included
  int32_t image_tokens = 0;
  double vision_ms = 0;  // all tiles
};

// Builds the prompt for `messages` (the last user message receives the images). Counts are
// checked before any graph runs: placeholders vs images, <IMG_CONTEXT> tokens vs features,
// prompt vs context. Runs the vision graph for every tile.
ImagePrompt build_image_prompt(Session& s, std::vector<text::ChatMessage> messages,
                               const std::vector<vision::Tiles>& images, int32_t n_predict);

// The same for text already rendered by the template (a later chat turn: add_bos false).
ImagePrompt build_image_prompt_text(Session& s, std::string rendered,
                                    const std::vector<vision::Tiles>& images, int32_t n_predict,
                                    bool add_bos);

// The preprocessing settings of the model, with max_tiles overridden when > 0.
vision::PreprocessConfig preprocess_config(const VisionConfig& v, int max_tiles = 0);

}  // namespace edgevl
