#include "runtime/chat/qwen_vl_prompt.h"

#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "core/error.h"
#include "format/qwen_vision_config.h"
#include "runtime/chat/prompt.h"
#include "runtime/execution/rope_positions.h"
#include "vision/image.h"
#include "vision/qwen_vl_preprocess.h"

namespace edgevl {

QwenVlTurn qwen_vl_prefill(Session& s, const std::vector<std::filesystem::path>& images,
                           const std::string& text, const std::string& system, bool thinking) {
  Engine& e = s.engine();
  const Model& m = s.model();
  const LlmConfig& c = m.config();
  check(e.qwen_max_patches() > 0, "{}: not a Qwen3-VL / Qwen3.5 model with a vision tower",
        m.file().path());
  check(s.n_past() == 0, "internal: an image prompt into a session that holds tokens");
  const QwenVisionShape vs = qwen_vision_shape(c);
  vision::QwenVlPreprocessConfig pre;
  pre.patch_size = vs.patch;
  pre.merge_size = vs.merge;
  pre.temporal_patch_size = vs.temporal;
  pre.min_pixels = c.flags.get_int("vision.min_pixels", int32_t(pre.min_pixels));
  // Images larger than the compiled tower are resized to fit it (smart_resize's own rule).
  pre.max_pixels = std::min<int64_t>(c.flags.get_int("vision.max_pixels", 0),
                                     int64_t(e.qwen_max_patches()) * vs.patch * vs.patch);
  for (int ch = 0; ch < 3; ++ch) {
    pre.mean[ch] = c.flags.get_float("vision.mean." + std::to_string(ch), pre.mean[ch]);
    pre.std[ch] = c.flags.get_float("vision.std." + std::to_string(ch), pre.std[ch]);
  }
  const int32_t image_token = c.flags.get_int("vision.image_token", -1);
  const text::Tokenizer& tok = m.tokenizer();

  QwenVlTurn turn;
  const size_t d = size_t(c.hidden), n_ds = size_t(e.deepstack_layers());
  std::vector<MergedGrid> grids;
  std::vector<std::vector<float>> feats, deep;
  std::string content;
  for (const auto& path : images) {
    auto t0 = std::chrono::steady_clock::now();
    const vision::QwenVlPixels px =
        vision::preprocess_qwen_vl(vision::decode_image_file(path), pre);
    turn.preprocess_ms += ms_since(t0);
    const size_t tokens = size_t(px.patches() / (vs.merge * vs.merge));
    feats.emplace_back(tokens * d);
    deep.emplace_back(n_ds * tokens * d);
    t0 = std::chrono::steady_clock::now();
    e.encode_qwen_image(px.values.data(), px.grid_h, px.grid_w, feats.back().data(),
                        deep.back().data());
    turn.vision_ms += ms_since(t0);
    grids.push_back({px.grid_h / vs.merge, px.grid_w / vs.merge});
    content += tok.piece(c.flags.get_int("vision.start_token", -1));
    for (size_t i = 0; i < tokens; ++i) content += tok.piece(image_token);
    content += tok.piece(c.flags.get_int("vision.end_token", -1));
    ++turn.images;
    turn.image_tokens += int32_t(tokens);
  }
  std::vector<text::ChatMessage> msgs;
  if (!system.empty()) msgs.push_back({"system", system});
  msgs.push_back({"user", content + text});
  turn.ids = encode_rendered(m, m.chat_template().render(msgs, true, thinking));
  const RopePositions pos = mrope_positions(turn.ids, image_token, grids);

  // The rows: token embeddings, the images' rows at their pads, DeepStack rows there.
  const size_t n = turn.ids.size();
  std::vector<float> rows(n * d), ds(n_ds * n * d, 0.f);
  e.embed(turn.ids, rows.data());
  size_t image = 0, j = 0;
  for (size_t i = 0; i < n; ++i) {
    if (turn.ids[i] != image_token) continue;
    if (j * d == feats[image].size()) ++image, j = 0;
    std::copy_n(feats[image].begin() + long(j * d), d, rows.begin() + long(i * d));
    const size_t tokens = feats[image].size() / d;
    for (size_t k = 0; k < n_ds; ++k)
      std::copy_n(deep[image].begin() + long((k * tokens + j) * d), d,
                  ds.begin() + long((k * n + i) * d));
    ++j;
  }
  // All but the last token (text: the generation prompt's "\n"), which the caller's generate()
  // evaluates at its cache position + rope_delta: the same position as here.
  check(n >= 2 && turn.ids.back() != image_token, "internal: an image prompt ending in an image");
  std::vector<float> ds_head;  // the DeepStack rows of the first n - 1 positions
  for (size_t k = 0; k < n_ds; ++k)
    ds_head.insert(ds_head.end(), ds.begin() + long(k * n * d),
                   ds.begin() + long((k * n + n - 1) * d));
  s.eval_multimodal(rows.data(), int64_t(n - 1), pos.thw.data(), n_ds ? ds_head.data() : nullptr);
  return turn;
}

}  // namespace edgevl
