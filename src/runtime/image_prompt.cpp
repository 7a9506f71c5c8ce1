#include "runtime/image_prompt.h"

#include <chrono>

#include "core/error.h"
#include "runtime/generate.h"
#include "runtime/prompt.h"

namespace edgevl {

namespace {

constexpr std::string_view kPlaceholder = "<image>";

size_t count_placeholders(const std::string& s) {
  size_t n = 0;
  for (size_t at = s.find(kPlaceholder); at != std::string::npos;
       at = s.find(kPlaceholder, at + kPlaceholder.size()))
    ++n;
  return n;
}

}  // namespace

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

ImagePrompt build_image_prompt(Session& s, std::vector<text::ChatMessage> messages,
                               const std::vector<vision::Tiles>& images, int32_t n_predict) {
  const Model& m = s.model();
  const VisionConfig* v = m.vision();
  check(v != nullptr || images.empty(), "{} is a text-only model: it cannot take images",
        m.file().path());
  check(!messages.empty() && messages.back().role == "user", "internal: no user message");
  std::string& question = messages.back().content;
  size_t placeholders = count_placeholders(question);
  if (placeholders == 0 && !images.empty()) {
    // InternVL's chat(): '<image>\n' + question (one per image for several images).
    std::string prefix;
    for (size_t i = 0; i < images.size(); ++i) prefix += "<image>\n";
    question = prefix + question;
    placeholders = images.size();
  }
  check(placeholders == images.size(),
        "the prompt has {} <image> placeholder(s) but {} image(s) were given", placeholders,
        images.size());

  return build_image_prompt_text(s, m.chat_template().render(messages, true), images, n_predict,
                                 true);
}

ImagePrompt build_image_prompt_text(Session& s, std::string rendered,
                                    const std::vector<vision::Tiles>& images, int32_t n_predict,
                                    bool add_bos) {
  const Model& m = s.model();
  const VisionConfig* v = m.vision();
  check(v != nullptr || images.empty(), "{} is a text-only model: it cannot take images",
        m.file().path());
  check(count_placeholders(rendered) >= images.size(),
        "the prompt has {} <image> placeholder(s) but {} image(s) were given",
        count_placeholders(rendered), images.size());
  ImagePrompt p;
  p.images = int32_t(images.size());
  const text::Tokenizer& tok = m.tokenizer();
  if (!images.empty()) {
    // Expand placeholders in order; the image blocks go in after rendering, like chat().
    std::string out;
    size_t from = 0;
    const std::string ctx = tok.piece(v->img_context_id);
    for (const auto& img : images) {
      const size_t at = rendered.find(kPlaceholder, from);
      out.append(rendered, from, at - from);
      out += tok.piece(v->img_start_id);
      for (int64_t i = 0; i < int64_t(img.count) * v->tokens_per_tile(); ++i) out += ctx;
      out += tok.piece(v->img_end_id);
      from = at + kPlaceholder.size();
      p.tiles += img.count;
    }
    out.append(rendered, from, std::string::npos);
    rendered = std::move(out);
  }
  // encode_chat's BOS handling, on the expanded text.
  if (add_bos && m.chat_template().tokenizer_bos && tok.add_bos() && tok.bos_id() >= 0)
    p.ids.push_back(tok.bos_id());
  for (int32_t id : tok.encode(rendered, true)) p.ids.push_back(id);

  const int64_t features = int64_t(p.tiles) * (v ? v->tokens_per_tile() : 0);
  int64_t ctx_tokens = 0;
  for (int32_t id : p.ids) ctx_tokens += v && id == v->img_context_id;
  check(ctx_tokens == features,
        "the prompt holds {} <IMG_CONTEXT> tokens but the images give {} features ({} tiles x "
        "{}); refusing to run",
        ctx_tokens, features, p.tiles, v ? v->tokens_per_tile() : 0);
  check_fits_context(s, int64_t(p.ids.size()), n_predict, m.file().path());
  p.image_tokens = int32_t(features);

  const int64_t d = m.config().hidden;
  p.embeds.resize(p.ids.size() * size_t(d));
  s.engine().embed(p.ids, p.embeds.data());
  const auto t0 = std::chrono::steady_clock::now();
  size_t next = 0;  // next <IMG_CONTEXT> position to fill
  std::vector<float> tile_out(v ? size_t(v->tokens_per_tile()) * size_t(d) : 0);
  const size_t tile_floats = v ? size_t(3) * size_t(v->image_size) * size_t(v->image_size) : 0;
  for (const auto& img : images) {
    for (int t = 0; t < img.count; ++t) {
      s.engine().encode_tile(img.pixels.data() + size_t(t) * tile_floats, tile_out.data());
      for (int64_t r = 0; r < v->tokens_per_tile(); ++r) {
        while (p.ids[next] != v->img_context_id) ++next;
        std::copy(tile_out.begin() + r * d, tile_out.begin() + (r + 1) * d,
                  p.embeds.begin() + int64_t(next) * d);
        ++next;
      }
    }
  }
  p.vision_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

}  // namespace edgevl
