#pragma once
// What a model family's processor makes of an image in a prompt, behind one interface, so that
// the conversation path (chat, serve, the C API, run) takes images the same way for every
// family: the pixels, the run of image tokens spliced into the chat template's text, the
// features written at those rows and, where the family has them, the 3D rotary positions
// (MRoPE) and DeepStack rows.
//
//   InternVL: dynamic 448x448 tiles; <img><IMG_CONTEXT> x (256 * tiles)</img> at each
//             "<image>\n"; plain positions.
//   Qwen-VL:  one image, smart_resize'd within the processor's (and the compiled tower's)
//             pixel bounds; <|vision_start|><|image_pad|> x (patches / 4)<|vision_end|>; 3D
//             positions from the merged grid; DeepStack rows when the tower has them
//             (Qwen3-VL; Qwen3.5 has none). Videos too (preprocess_video): frames sampled and
//             resized by Qwen3VLVideoProcessor's rules, one run of <|video_pad|> per temporal
//             group of two frames, each after its "<t seconds>" timestamp.
//
// ImageProcessor::for_model is the one place that decides which a binary takes, by what it
// holds (a Qwen-VL tower graph, else InternVL's vision section), not by the family's name.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/execution/model.h"
#include "runtime/execution/rope_positions.h"
#include "vision/image.h"
#include "vision/preprocess.h"

namespace edgevl {

class Engine;

// The processor's output for one image. InternVL: [tiles][3][size][size]; Qwen-VL:
// [patches][3 * T * P * P] in merge-block order.
struct ProcessedPixels {
  std::vector<float> pixels;
  std::vector<int64_t> shape;
};

// One image ready to be placed in a prompt. Its token count is known as soon as it is
// prepared; the features are computed when a prompt first needs them.
struct PreparedImage {
  uint64_t key = 0;        // content hash (source bytes or pixels, and the processor's settings)
  int32_t tiles = 0;       // InternVL: tiles (thumbnail included); Qwen-VL: 1 (one tower run)
  int32_t tokens = 0;      // image tokens it takes in a prompt (= rows of `features`)
  MergedGrid grid;         // Qwen-VL: the merged grid its 3D positions follow; 0 x 0 otherwise
  ProcessedPixels pixels;  // emptied once encoded unless ImageOptions::keep_pixels
  std::shared_ptr<const std::vector<float>> features;   // [tokens][hidden]
  std::shared_ptr<const std::vector<float>> deepstack;  // [layers][tokens][hidden]; null: none
  double preprocess_ms = 0;                             // decoding and preprocessing
  // A video (Qwen-VL): `groups` temporal groups of grid.rows * grid.cols tokens each, one run
  // of video tokens per group in the prompt (timestamp text between), the features of all
  // groups in order. 0 for an image.
  int32_t groups = 0;
  std::vector<double> timestamps;  // seconds, one per group
  bool is_video() const { return groups > 0; }
  // The rows of one run of its tokens in a prompt (the whole image, or one group).
  int32_t run_tokens() const { return groups > 0 ? tokens / groups : tokens; }
  int32_t runs() const { return groups > 0 ? groups : 1; }
};

class ImageProcessor {
 public:
  virtual ~ImageProcessor() = default;

  // The processor of `m`'s images; null for a model that takes none. max_tiles > 0 lowers
  // InternVL's tile limit (Qwen-VL has no tiles: ignored).
  static std::unique_ptr<ImageProcessor> for_model(const Model& m, int max_tiles = 0);

  // Folded into every image's content key (the same bytes under other settings are another
  // image).
  virtual uint64_t settings_key() const = 0;
  // Pixels, tiles, tokens and grid of `out` from a decoded image. Throws for an image the
  // processor refuses (e.g. an aspect ratio above 200 for Qwen-VL).
  virtual void preprocess(const vision::Image& img, PreparedImage& out) const = 0;
  // The features (and DeepStack rows) of `img`'s pixels through `e`'s vision graph.
  virtual void encode(Engine& e, PreparedImage& img) const = 0;

  // Video: whether the family takes it, and a video file's (or bytes') frames sampled,
  // preprocessed into `out` (groups, timestamps, pixels). The default refuses.
  virtual bool takes_video() const { return false; }
  virtual void preprocess_video(const std::filesystem::path* file, std::span<const uint8_t> bytes,
                                const std::string& name, int64_t max_pixels,
                                PreparedImage& out) const;
  // The token repeated over a video's rows; -1: none.
  virtual int32_t video_token() const { return -1; }

  // What a user message's content gets in front, per image, when it has no "<image>"
  // placeholder: where the family's chat template puts an image part of the content.
  virtual std::string_view default_placeholder() const = 0;
  // The text one image (or video) becomes in the rendered prompt (special tokens spelled out).
  virtual std::string token_run(const text::Tokenizer& tok, const PreparedImage& img) const = 0;
  // The token repeated over an image's rows (their features replace its embedding).
  virtual int32_t image_token() const = 0;
  // Whether prompts with images take 3D rotary positions (Prompt::rope_thw).
  virtual bool positions_3d() const = 0;
};

// InternVL's preprocessing settings of a model, with max_tiles overridden when > 0.
vision::PreprocessConfig preprocess_config(const VisionConfig& v, int max_tiles = 0);

}  // namespace edgevl
