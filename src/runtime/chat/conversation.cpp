#include "runtime/chat/conversation.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/chat/prompt.h"
#include "runtime/decoding/speculative.h"
#include "runtime/decoding/token_loop.h"
#include "runtime/execution/rope_positions.h"

namespace edgevl {

namespace {

constexpr std::string_view kPlaceholder = "<image>";
// A video's place in a user message (Qwen-VL); its template part goes where the image's would.
constexpr std::string_view kVideoPlaceholder = "<video>";

// The next placeholder of either kind at or after `from`: its position (npos: none) and kind.
std::pair<size_t, bool> next_placeholder(std::string_view s, size_t from) {
  const size_t i = s.find(kPlaceholder, from), v = s.find(kVideoPlaceholder, from);
  return v < i ? std::pair{v, true} : std::pair{i, false};
}

size_t count_placeholders(std::string_view s) {
  size_t n = 0;
  for (size_t at = next_placeholder(s, 0).first; at != std::string::npos;
       at = next_placeholder(s, at + kPlaceholder.size()).first)
    ++n;
  return n;
}

// Each <image> (<video>) of the rendered text becomes the image's (video's) token run
// (InternVL: <img><IMG_CONTEXT> x (tiles * tokens)</img>), after rendering, like chat() does.
std::string expand_placeholders(const Model& m, const ImageProcessor& proc,
                                const std::string& rendered, const std::vector<ImageRef>& images) {
  std::string out;
  size_t from = 0;
  for (size_t k = 0; k < images.size(); ++k) {
    const auto [at, video] = next_placeholder(rendered, from);
    check(video == images[k]->is_video(), "the prompt has {} where {} {} was given",
          video ? kVideoPlaceholder : kPlaceholder, images[k]->is_video() ? "a video" : "an image",
          k + 1);
    out.append(rendered, from, at - from);
    out += proc.token_run(m.tokenizer(), *images[k]);
    from = at + (video ? kVideoPlaceholder : kPlaceholder).size();
  }
  out.append(rendered, from, std::string::npos);
  return out;
}

}  // namespace

Prompt build_chat_prompt(const Model& m, const std::vector<Message>& messages, bool thinking) {
  check(!messages.empty(), "no messages: a conversation needs at least one user message");
  const std::unique_ptr<ImageProcessor> proc = ImageProcessor::for_model(m);
  std::vector<text::ChatMessage> chat;
  std::vector<ImageRef> images;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& msg = messages[i];
    check(msg.role == "system" || msg.role == "user" || msg.role == "assistant",
          "message {}: unknown role '{}' (system, user or assistant)", i + 1, msg.role);
    std::string content = msg.content;
    if (!msg.images.empty()) {
      check(proc != nullptr, "{} is a text-only model: it cannot take images", m.file().path());
      check(msg.role == "user", "message {}: only user messages can carry images", i + 1);
    }
    if (proc) {
      size_t placeholders = count_placeholders(content);
      if (placeholders == 0 && !msg.images.empty()) {
        std::string prefix;
        for (const ImageRef& img : msg.images)
          prefix += img->is_video() ? kVideoPlaceholder : proc->default_placeholder();
        content = prefix + content;
        placeholders = msg.images.size();
      }
      const bool videos = std::any_of(msg.images.begin(), msg.images.end(),
                                      [](const ImageRef& r) { return r->is_video(); });
      check(placeholders == msg.images.size(),
            "the prompt has {} {} placeholder(s) but {} {} given{}", placeholders,
            videos ? "<image> / <video>" : "<image>", msg.images.size(),
            videos ? "image(s) / video(s) were" : "image(s) were",
            messages.size() > 1 ? fmt::format(" (message {})", i + 1) : std::string());
      images.insert(images.end(), msg.images.begin(), msg.images.end());
    }
    chat.push_back({msg.role, std::move(content)});
  }
  std::string rendered = m.chat_template().render(chat, true, thinking);
  if (!images.empty()) {
    check(count_placeholders(rendered) == images.size(),
          "the chat template's text holds <image> or <video> where none was given: refusing to "
          "guess");
    rendered = expand_placeholders(m, *proc, rendered, images);
  }
  Prompt p;
  p.ids = encode_rendered(m, std::move(rendered));
  if (!proc) return p;

  // Every run of image (video) tokens must be exactly one image's features (one temporal group
  // of a video's), in order.
  const int32_t image_token = proc->image_token(), video_token = proc->video_token();
  size_t next = 0;
  int32_t group = 0;  // of images[next], when a video
  for (int64_t i = 0; i < int64_t(p.ids.size());) {
    const int32_t id = p.ids[size_t(i)];
    if (id != image_token && (video_token < 0 || id != video_token)) {
      ++i;
      continue;
    }
    int64_t j = i;
    while (j < int64_t(p.ids.size()) && p.ids[size_t(j)] == id) ++j;
    // (A run exists, so the token is in the vocabulary and has a spelling.)
    const std::string name = m.tokenizer().piece(id);
    check(next < images.size() && images[next]->is_video() == (id == video_token),
          "the prompt holds {} tokens that no {} fills; refusing to run", name,
          id == video_token ? "video" : "image");
    const PreparedImage& img = *images[next];
    const int64_t want = img.run_tokens();
    check(j - i == want,
          "the prompt holds {} {} tokens where {} {} gives {} features ({} tile(s)); refusing "
          "to run",
          j - i, name, img.is_video() ? "video" : "image", next + 1, want, img.tiles);
    p.images.push_back({i, j - i, images[next], int64_t(group) * want});
    if (group == 0) p.tiles += img.tiles;
    if (++group == img.runs()) ++next, group = 0;
    i = j;
  }
  check(next == images.size() && group == 0,
        "{} image(s) / video(s) given but the prompt has room for {}", images.size(), next);
  return p;
}

Prompt build_raw_prompt(const Model& m, const std::string& text, bool add_bos) {
  Prompt p;
  p.ids = encode_raw(m, text, add_bos);
  if (const auto proc = ImageProcessor::for_model(m))
    if (std::find(p.ids.begin(), p.ids.end(), proc->image_token()) != p.ids.end())
      throw Error(fmt::format("raw prompts cannot hold {} tokens: images need the chat template",
                              m.tokenizer().piece(proc->image_token())));
  return p;
}

PromptRows prompt_rows(Engine& e, VisionEncoder* vision, const Prompt& p, int64_t from) {
  const int64_t d = e.model().config().hidden, n = int64_t(p.ids.size()) - from;
  check(n > 0, "internal: no prompt rows to embed");
  PromptRows r;
  std::vector<float>& rows = r.embeddings;
  rows.resize(size_t(n) * size_t(d));
  e.embed(std::span<const int32_t>(p.ids).subspan(size_t(from)), rows.data());
  if (!p.images.empty() && vision && vision->processor().positions_3d()) {
    // Every row's (t, h, w): the whole prompt's (an image shifts all text after it), then the
    // rows from `from` on.
    std::vector<MergedGrid> grids;
    for (const auto& run : p.images) grids.push_back(run.image->grid);
    const RopePositions pos = mrope_positions(p.ids, vision->processor().image_token(), grids,
                                              vision->processor().video_token());
    r.mm.rope_thw.assign(pos.thw.begin() + 3 * from, pos.thw.end());
    r.mm.layers = e.deepstack_layers();
    r.mm.deepstack.assign(size_t(r.mm.layers) * size_t(n) * size_t(d), 0.f);
  }
  for (const auto& run : p.images) {
    if (run.first + run.count <= from) continue;
    check(vision != nullptr, "internal: an image prompt without a vision encoder");
    const auto f = vision->features(*run.image);
    const int64_t skip = std::max<int64_t>(0, from - run.first);
    // This run's rows of the image's features: from `offset` (a video's group) on.
    const int64_t a = run.offset + skip, b = run.offset + run.count, all = run.image->tokens;
    check(int64_t(f->size()) == all * d && b <= all,
          "internal: {} feature values for rows {}..{} of an image of {} tokens", f->size(), a, b,
          all);
    std::copy(f->begin() + a * d, f->begin() + b * d, rows.begin() + (run.first + skip - from) * d);
    // DeepStack rows ([layers][tokens][d]) at the same positions of each layer's rows.
    const auto& ds = run.image->deepstack;
    if (!ds || r.mm.layers == 0) continue;
    check(ds->size() == size_t(r.mm.layers) * size_t(all) * size_t(d),
          "internal: {} DeepStack values for an image of {} tokens", ds->size(), all);
    for (int64_t k = 0; k < r.mm.layers; ++k)
      std::copy(ds->begin() + (k * all + a) * d, ds->begin() + (k * all + b) * d,
                r.mm.deepstack.begin() + (k * n + run.first + skip - from) * d);
  }
  return r;
}

std::vector<float> prompt_embeddings(Engine& e, VisionEncoder* vision, const Prompt& p,
                                     int64_t from) {
  check(p.images.empty() || !vision || !vision->processor().positions_3d(),
        "{}: this image prompt needs 3D positions (Qwen-VL); evaluate it through a Conversation",
        e.model().file().path());
  return prompt_rows(e, vision, p, from).embeddings;
}

std::span<const float> eval_prompt(Session& s, VisionEncoder* vision, const Prompt& p) {
  PromptRows rows = prompt_rows(s.engine(), vision, p);
  const int64_t n = int64_t(p.ids.size());
  if (rows.mm.rope_thw.empty()) return s.eval_embeddings(rows.embeddings.data(), n);
  return s.eval_multimodal(rows.embeddings.data(), n, rows.mm.rope_thw.data(),
                           rows.mm.layers > 0 ? rows.mm.deepstack.data() : nullptr);
}

Conversation::Conversation(Session& session, VisionEncoder* vision)
    : session_(session), vision_(vision) {
  // Whatever the session held before is not known here: start from an empty cache.
  session_.reset();
}

Conversation::~Conversation() {
  session_.mark_when_at(-1, nullptr);
}

void Conversation::reset() {
  held_ids_.clear();
  held_keys_.clear();
  prompt_mark_.n_past = -1;
  session_.reset();
}

int32_t Conversation::shared_prefix(const Prompt& p) const {
  const int32_t match = matching_prefix(p);
  if (!session_.has_recurrent_state() || match == session_.n_past()) return match;
  // A recurrent state holds every token it saw and cannot be cut back, only rewound to a mark.
  const int32_t mark = prompt_mark_.n_past;
  return mark >= 0 && mark <= match && mark <= session_.n_past() ? mark : 0;
}

int32_t Conversation::matching_prefix(const Prompt& p) const {
  const size_t n = std::min(held_ids_.size(), p.ids.size());
  size_t run = 0;  // index into p.images
  size_t i = 0;
  for (; i < n; ++i) {
    while (run < p.images.size() && int64_t(i) >= p.images[run].first + p.images[run].count) ++run;
    const bool in_image = run < p.images.size() && int64_t(i) >= p.images[run].first;
    const uint64_t key = in_image ? p.images[run].image->key : 0;
    if (held_ids_[i] != p.ids[i] || held_keys_[i] != key) break;
  }
  return int32_t(i);
}

std::unique_ptr<Generator> Conversation::start(const Prompt& p, const GenerateOptions& o,
                                               TurnStats* stats, bool defer_prefill) {
  const Model& m = session_.model();
  check(!p.ids.empty(), "empty prompt: nothing to condition on");
  check(vision_ != nullptr || p.images.empty(), "{}: images given but no vision encoder",
        m.file().path());
  // Keep at least the last prompt token to evaluate: its logits start the reply.
  int32_t keep = std::min<int32_t>(shared_prefix(p), int32_t(p.ids.size()) - 1);
  if (session_.has_recurrent_state()) {
    // Back to the last prompt's end (its mark), or to the whole held sequence; anything else
    // is recomputed. This prompt's end is marked when its evaluation reaches it.
    if (keep == prompt_mark_.n_past && keep != session_.n_past())
      session_.rewind(prompt_mark_);
    else if (keep != session_.n_past())
      keep = 0;
    session_.mark_when_at(int32_t(p.ids.size()), &prompt_mark_);
  }
  session_.truncate(keep);
  held_ids_.resize(size_t(keep));
  held_keys_.resize(size_t(keep));
  check_fits_context(session_, int64_t(p.ids.size()) - keep, o.n_predict, m.file().path());

  const VisionStats before = vision_ ? vision_->stats() : VisionStats{};
  PromptRows rows;
  if (!p.images.empty() && p.images.back().first + p.images.back().count > keep)
    rows = prompt_rows(session_.engine(), vision_, p, keep);
  if (stats) {
    *stats = TurnStats{};
    stats->prompt_tokens = int32_t(p.ids.size());
    stats->reused_tokens = keep;
    stats->images = 0;  // a video's groups are runs of one item
    for (const auto& run : p.images) stats->images += run.offset == 0;
    stats->tiles = p.tiles;
    for (const auto& run : p.images) stats->image_tokens += int32_t(run.count);
    if (vision_) {
      stats->tiles_encoded = vision_->stats().tiles_encoded - before.tiles_encoded;
      stats->vision_ms = vision_->stats().vision_ms - before.vision_ms;
    }
  }
  auto g = std::make_unique<Generator>(session_, o);
  try {
    g->prefill_begin(p.ids, std::move(rows.embeddings), keep, std::move(rows.mm));
    if (!defer_prefill) g->prefill_continue(int64_t(p.ids.size()));
  } catch (...) {
    reset();  // what the cache holds past `keep` is unknown now
    throw;
  }
  size_t run = 0;
  for (size_t i = size_t(keep); i < p.ids.size(); ++i) {
    held_ids_.push_back(p.ids[i]);
    while (run < p.images.size() && int64_t(i) >= p.images[run].first + p.images[run].count) ++run;
    const bool in_image = run < p.images.size() && int64_t(i) >= p.images[run].first;
    held_keys_.push_back(in_image ? p.images[run].image->key : 0);
  }
  return g;
}

void Conversation::finish(const Generator& g) {
  if (size_t(session_.n_past()) < held_ids_.size()) {
    // Stopped during the prompt: the part evaluated is still a prefix worth keeping.
    held_ids_.resize(size_t(session_.n_past()));
    held_keys_.resize(held_ids_.size());
    return;
  }
  // Generated tokens that were fed to the session (the last one sampled usually is not).
  const std::vector<int32_t>& toks = g.result().tokens;
  const size_t fed = size_t(session_.n_past()) - held_ids_.size();
  check(fed <= toks.size(), "internal: the session holds {} tokens the conversation does not know",
        fed);
  held_ids_.insert(held_ids_.end(), toks.begin(), toks.begin() + long(fed));
  held_keys_.resize(held_ids_.size(), 0);
}

GenerateResult Conversation::run(const Prompt& p, const GenerateOptions& o,
                                 const std::function<void(std::string_view)>& on_text,
                                 TurnStats* stats) {
  std::unique_ptr<Generator> g = start(p, o, stats);
  try {
    run_to_end(*g, [&](std::string_view t) {
      if (on_text) on_text(t);
      return true;
    });
  } catch (...) {
    reset();
    throw;
  }
  finish(*g);
  return std::move(g->result());
}

GenerateResult Conversation::reply(const std::vector<Message>& messages, GenerateOptions o,
                                   const std::function<void(std::string_view)>& on_text,
                                   TurnStats* stats) {
  const Model& m = session_.model();
  check(!messages.empty(), "no messages: a conversation needs at least one user message");
  check(messages.back().role == "user", "the last message must be the user's (got '{}')",
        messages.back().role);
  for (const auto& s : m.chat_template().stop_strings) o.stop_strings.push_back(s);
  return run(build_chat_prompt(m, messages), o, on_text, stats);
}

GenerateResult Conversation::complete(const std::string& text, bool add_bos,
                                      const GenerateOptions& o,
                                      const std::function<void(std::string_view)>& on_text,
                                      TurnStats* stats) {
  return run(build_raw_prompt(session_.model(), text, add_bos), o, on_text, stats);
}

}  // namespace edgevl
