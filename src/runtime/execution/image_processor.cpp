#include "runtime/execution/image_processor.h"

#include <algorithm>

#include "core/error.h"
#include "format/qwen_vision_config.h"
#include "runtime/execution/engine.h"
#include "vision/preprocess.h"
#include "vision/qwen_vl_preprocess.h"
#include "vision/qwen_vl_video.h"
#include "vision/video.h"

namespace edgevl {

namespace {

// InternVL (InternViT + pixel shuffle + mlp1): what edgevl did before Qwen-VL, unchanged.
class InternVlProcessor final : public ImageProcessor {
 public:
  InternVlProcessor(const VisionConfig& v, int max_tiles)
      : v_(v), pre_(preprocess_config(v, max_tiles)) {}

  // The tile limit changes the tiling; the keys of earlier versions were seeded by it alone.
  uint64_t settings_key() const override { return uint64_t(pre_.max_tiles); }

  void preprocess(const vision::Image& img, PreparedImage& out) const override {
    vision::Tiles t = vision::preprocess(img, pre_);
    out.tiles = t.count;
    out.tokens = t.count * int32_t(v_.tokens_per_tile());
    out.pixels.pixels = std::move(t.pixels);
    out.pixels.shape = {t.count, 3, v_.image_size, v_.image_size};
  }

  void encode(Engine& e, PreparedImage& img) const override {
    const int64_t d = e.model().config().hidden, per_tile = v_.tokens_per_tile() * d;
    const size_t tile_floats = size_t(3) * size_t(v_.image_size) * size_t(v_.image_size);
    check(img.pixels.pixels.size() == size_t(img.tiles) * tile_floats,
          "internal: image without pixels or features");
    auto out = std::make_shared<std::vector<float>>(size_t(img.tiles) * size_t(per_tile));
    for (int32_t t = 0; t < img.tiles; ++t)
      e.encode_tile(img.pixels.pixels.data() + size_t(t) * tile_floats,
                    out->data() + size_t(t) * size_t(per_tile));
    img.features = std::move(out);
  }

  // InternVL's chat(): "<image>\n" before the question.
  std::string_view default_placeholder() const override { return "<image>\n"; }

  std::string token_run(const text::Tokenizer& tok, const PreparedImage& img) const override {
    const std::string ctx = tok.piece(v_.img_context_id);
    std::string out = tok.piece(v_.img_start_id);
    for (int32_t i = 0; i < img.tokens; ++i) out += ctx;
    return out + tok.piece(v_.img_end_id);
  }

  int32_t image_token() const override { return v_.img_context_id; }
  bool positions_3d() const override { return false; }

 private:
  VisionConfig v_;
  vision::PreprocessConfig pre_;
};

// Qwen-VL (Qwen3-VL, and Qwen3.5 with the same tower and processor): the settings the
// compiler stored in the config's flags (runtime/chat/qwen_vl_prompt.cpp reads the same).
class QwenVlProcessor final : public ImageProcessor {
 public:
  QwenVlProcessor(const Model& m, int32_t max_patches)
      : shape_(qwen_vision_shape(m.config())), max_patches_(max_patches) {
    const auto& f = m.config().flags;
    check(shape_.present() && shape_.merge > 0 && max_patches > 0,
          "{}: the Qwen-VL vision tower's shape is missing (corrupted file?)", m.file().path());
    pre_.patch_size = shape_.patch;
    pre_.merge_size = shape_.merge;
    pre_.temporal_patch_size = shape_.temporal;
    pre_.min_pixels = f.get_int("vision.min_pixels", int32_t(pre_.min_pixels));
    // An image larger than the compiled tower is resized to fit it: smart_resize's own rule
    // with max_pixels = the tower's patches (docs/qwen3_vl.md, "Images of any size").
    pre_.max_pixels = std::min<int64_t>(f.get_int("vision.max_pixels", 0),
                                        int64_t(max_patches) * shape_.patch * shape_.patch);
    for (int ch = 0; ch < 3; ++ch) {
      pre_.mean[ch] = f.get_float("vision.mean." + std::to_string(ch), pre_.mean[ch]);
      pre_.std[ch] = f.get_float("vision.std." + std::to_string(ch), pre_.std[ch]);
    }
    image_ = f.get_int("vision.image_token", -1);
    start_ = f.get_int("vision.start_token", -1);
    end_ = f.get_int("vision.end_token", -1);
    // Checked when an image is prepared, not here: text prompts of a binary without them
    // (build_chat_prompt asks for the processor every time) must still work.
    const int32_t vocab = int32_t(m.tokenizer().vocab_size());
    ids_ok_ =
        image_ >= 0 && image_ < vocab && start_ >= 0 && start_ < vocab && end_ >= 0 && end_ < vocab;
    path_ = m.file().path();
    // The video processor's settings (compiler/import.cpp); absent in binaries compiled before
    // edgevl took video, which then refuse it.
    video_ok_ = f.has("video.fps") && f.has("vision.video_token");
    video_ = f.get_int("vision.video_token", -1);
    vcfg_.pre = pre_;
    vcfg_.pre.min_pixels = f.get_int("video.min_pixels", int32_t(vcfg_.pre.min_pixels));
    vcfg_.pre.max_pixels = f.get_int("video.max_pixels", int32_t(vcfg_.pre.max_pixels));
    for (int ch = 0; ch < 3; ++ch) {
      vcfg_.pre.mean[ch] = f.get_float("video.mean." + std::to_string(ch), 0.5f);
      vcfg_.pre.std[ch] = f.get_float("video.std." + std::to_string(ch), 0.5f);
    }
    vcfg_.sampling.fps = f.get_float("video.fps", 2.f);
    vcfg_.sampling.min_frames = f.get_int("video.min_frames", 4);
    vcfg_.sampling.max_frames = f.get_int("video.max_frames", 768);
    vcfg_.cap_pixels_per_frame = f.get_int("video.cap_pixels_per_frame", 0) != 0;
    vcfg_.max_video_tokens = f.get_int("video.max_video_tokens", 768);
  }

  bool takes_video() const override { return true; }
  int32_t video_token() const override { return video_; }

  void preprocess_video(const std::filesystem::path* file, std::span<const uint8_t> bytes,
                        const std::string& name, int64_t max_pixels,
                        PreparedImage& out) const override {
    check(video_ok_ && ids_ok_ && video_ >= 0,
          "{}: the binary holds no video settings (compiled before edgevl took video): recompile "
          "it to give it videos",
          path_);
    vision::VideoLimits lim;
    lim.max_pixels = max_pixels;
    const vision::Video v = file ? vision::decode_video_file(*file, vcfg_.sampling, lim)
                                 : vision::decode_video_memory(bytes, name, vcfg_.sampling, lim);
    // A frame larger than the compiled tower is resized to fit it, as an image is: the
    // budget over all frames lowered to the tower's patches times min(frames, t_bar), so
    // smart_resize's beta (from the frame count) lands each frame within the tower.
    vision::QwenVlVideoConfig cfg = vcfg_;
    const int64_t frames = int64_t(v.frames.size()), T = cfg.pre.temporal_patch_size;
    // t_bar = round(frames / T) * T, Python's round (half to even).
    const int64_t q = frames / T, twice_rem = 2 * (frames % T);
    const int64_t t_bar = T * (twice_rem > T || (twice_rem == T && q % 2) ? q + 1 : q);
    cfg.pre.max_pixels =
        std::min<int64_t>(cfg.pre.max_pixels, int64_t(max_patches_) * shape_.patch * shape_.patch *
                                                  std::min(frames, t_bar));
    cfg.pre.min_pixels = std::min(cfg.pre.min_pixels, cfg.pre.max_pixels);
    vision::QwenVlVideoPixels px = vision::preprocess_qwen_vl_video(v, cfg);
    check(px.frame_patches() <= max_patches_,
          "{}: frames of {}x{} resize to {}x{} patches, more than the {} the vision tower was "
          "compiled for (their aspect ratio is too extreme)",
          name, v.width, v.height, px.grid_w, px.grid_h, max_patches_);
    const int32_t m = shape_.merge;
    out.tiles = px.grid_t;  // tower runs
    out.groups = px.grid_t;
    out.grid = {px.grid_h / m, px.grid_w / m};
    out.tokens = px.grid_t * out.grid.rows * out.grid.cols;
    out.timestamps = std::move(px.timestamps);
    out.pixels.shape = {int64_t(px.grid_t) * px.frame_patches(), pre_.row_values()};
    out.pixels.pixels = std::move(px.values);
  }

  uint64_t settings_key() const override {
    return 0x7177656e766cULL ^ (uint64_t(pre_.min_pixels) << 32) ^ uint64_t(pre_.max_pixels);
  }

  void preprocess(const vision::Image& img, PreparedImage& out) const override {
    check(ids_ok_,
          "{}: the binary's Qwen-VL image token ids ({}, {}, {}) are not in its vocabulary: it "
          "cannot take images (recompile it)",
          path_, start_, image_, end_);
    vision::QwenVlPixels px = vision::preprocess_qwen_vl(img, pre_);
    // smart_resize keeps a side at one block at least: a very long and thin image can come
    // out above max_pixels, and then above what the compiled tower takes.
    check(px.patches() <= max_patches_,
          "image {}x{} resizes to {}x{} patches, more than the {} the vision tower was compiled "
          "for (its aspect ratio is too extreme)",
          img.width, img.height, px.grid_w, px.grid_h, max_patches_);
    const int32_t m = shape_.merge;
    out.tiles = 1;
    out.grid = {px.grid_h / m, px.grid_w / m};
    out.tokens = out.grid.rows * out.grid.cols;
    out.pixels.shape = {px.patches(), pre_.row_values()};
    out.pixels.pixels = std::move(px.values);
  }

  void encode(Engine& e, PreparedImage& img) const override {
    const int32_t m = shape_.merge;
    const size_t d = size_t(e.model().config().hidden), k = shape_.deepstack.size();
    check(img.grid.rows > 0 && img.grid.cols > 0 &&
              img.pixels.pixels.size() == size_t(img.runs()) * size_t(img.grid.rows * m) *
                                              size_t(img.grid.cols * m) * size_t(pre_.row_values()),
          "internal: image without pixels or features");
    check(int32_t(k) == e.deepstack_layers(),
          "{}: the vision tower has {} DeepStack features, the language model {} (corrupted "
          "file?)",
          e.model().file().path(), k, e.deepstack_layers());
    auto feats = std::make_shared<std::vector<float>>(size_t(img.tokens) * d);
    auto deep = k ? std::make_shared<std::vector<float>>(k * size_t(img.tokens) * d) : nullptr;
    e.encode_qwen_video(img.pixels.pixels.data(), img.runs(), img.grid.rows * m, img.grid.cols * m,
                        feats->data(), deep ? deep->data() : nullptr);
    img.features = std::move(feats);
    img.deepstack = std::move(deep);
  }

  // Qwen3-VL's template puts an image part where it is in the content, with nothing around
  // it; an image given beside the text goes first, as transformers' processor examples do.
  std::string_view default_placeholder() const override { return "<image>"; }

  std::string token_run(const text::Tokenizer& tok, const PreparedImage& img) const override {
    const std::string start = tok.piece(start_), end = tok.piece(end_);
    const std::string pad = tok.piece(img.is_video() ? video_ : image_);
    auto run = [&](int32_t n) {
      std::string r = start;
      for (int32_t i = 0; i < n; ++i) r += pad;
      return r + end;
    };
    if (!img.is_video()) return run(img.tokens);
    // The template's video part (<|vision_start|><|video_pad|><|vision_end|>) with its pad
    // expanded as Qwen3VLProcessor.replace_video_token does: per temporal group its timestamp,
    // then the group's own <|vision_start|>pads<|vision_end|>.
    std::string out = start;
    for (int32_t g = 0; g < img.groups; ++g)
      out += vision::video_timestamp_text(img.timestamps[size_t(g)]) + run(img.run_tokens());
    return out + end;
  }

  int32_t image_token() const override { return image_; }
  bool positions_3d() const override { return true; }

 private:
  QwenVisionShape shape_;
  int32_t max_patches_ = 0;
  vision::QwenVlPreprocessConfig pre_;
  int32_t image_ = -1, start_ = -1, end_ = -1;
  bool ids_ok_ = false;
  std::string path_;
  int32_t video_ = -1;
  bool video_ok_ = false;
  vision::QwenVlVideoConfig vcfg_;
};

}  // namespace

void ImageProcessor::preprocess_video(const std::filesystem::path*, std::span<const uint8_t>,
                                      const std::string& name, int64_t, PreparedImage&) const {
  fail("{}: this model takes images but not videos (video input is Qwen3-VL's and Qwen3.5's)",
       name);
}

vision::PreprocessConfig preprocess_config(const VisionConfig& v, int max_tiles) {
  vision::PreprocessConfig c;
  c.image_size = v.image_size;
  c.min_tiles = v.min_tiles;
  c.max_tiles = max_tiles > 0 ? max_tiles : v.max_tiles;
  check(c.max_tiles >= c.min_tiles, "--max-tiles {} is below the model's minimum of {} tiles",
        c.max_tiles, c.min_tiles);
  c.use_thumbnail = v.use_thumbnail;
  for (int i = 0; i < 3; ++i) {
    c.mean[i] = v.mean[size_t(i)];
    c.std[i] = v.std[size_t(i)];
  }
  return c;
}

std::unique_ptr<ImageProcessor> ImageProcessor::for_model(const Model& m, int max_tiles) {
  // A Qwen-VL tower (its graph) wins: such a binary has no InternVL vision section.
  if (const Graph* g = m.find_graph("qwen_vision"))
    return std::make_unique<QwenVlProcessor>(m, g->width);
  if (const VisionConfig* v = m.vision()) return std::make_unique<InternVlProcessor>(*v, max_tiles);
  return nullptr;
}

}  // namespace edgevl
