#include "runtime/assistant.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/decoding/token_loop.h"
#include "text/tokenizer.h"

namespace edgevl {

Assistant::Assistant(const std::filesystem::path& model, const AssistantOptions& o)
    : model_(std::make_unique<Model>(model)),
      engine_(std::make_unique<Engine>(*model_, EngineOptions{o.threads, o.backend})) {
  if (VisionEncoder::takes_images(*model_))
    vision_ = std::make_unique<VisionEncoder>(*engine_, o.images);
}

void Assistant::need_vision(const std::string& what) const {
  check(vision_ != nullptr, "{} is a text-only model: it cannot take images ({})",
        model_->file().path(), what);
}

ImageRef Assistant::image_file(const std::filesystem::path& path) {
  need_vision(path.string());
  return vision_->prepare_file(path);
}

ImageRef Assistant::video_file(const std::filesystem::path& path) {
  need_vision(path.string());
  return vision_->prepare_video_file(path);
}

ImageRef Assistant::video_bytes(std::span<const uint8_t> encoded, const std::string& what) {
  need_vision(what);
  return vision_->prepare_video_bytes(encoded, what);
}

ImageRef Assistant::image_bytes(std::span<const uint8_t> encoded, const std::string& what) {
  need_vision(what);
  return vision_->prepare_bytes(encoded, what);
}

ImageRef Assistant::image_rgb(int width, int height, std::span<const uint8_t> rgb) {
  need_vision("RGB pixels");
  return vision_->prepare_rgb(width, height, rgb);
}

Prompt Assistant::chat_prompt(const std::vector<Message>& messages, bool thinking) const {
  return build_chat_prompt(*model_, messages, thinking);
}

Prompt Assistant::raw_prompt(const std::string& text, bool add_bos) const {
  return build_raw_prompt(*model_, text, add_bos);
}

std::shared_ptr<const TokenVocabulary> Assistant::vocabulary() {
  if (!vocab_) vocab_ = std::make_shared<const TokenVocabulary>(model_->tokenizer());
  return vocab_;
}

double ReplyStats::prefill_tokens_per_s() const {
  return prefill_ms > 0 ? (prompt_tokens - reused_tokens) * 1000.0 / prefill_ms : 0.0;
}

double ReplyStats::decode_tokens_per_s() const {
  const int32_t decoded = std::max(0, generated_tokens - 1);
  return decode_ms > 0 && decoded > 0 ? decoded * 1000.0 / decode_ms : 0.0;
}

Chat::Chat(Assistant& a, int32_t context)
    : a_(a), session_(a.engine(), SessionOptions{0, context}), conv_(session_, a.vision()) {}

void Chat::add_image(ImageRef image) {
  check(a_.has_vision(), "{} is a text-only model: it cannot take images",
        a_.model().file().path());
  check(image != nullptr, "add_image: no image");
  pending_.push_back(std::move(image));
}

Turn Chat::turn(const std::string& user_text) const {
  Turn t;
  t.messages = history_;
  if (t.messages.empty() && !system_.empty()) t.messages.push_back({"system", system_, {}});
  t.messages.push_back({"user", user_text, pending_});
  for (const ImageRef& img : pending_) t.preprocess_ms += img->preprocess_ms;
  t.prompt = a_.chat_prompt(t.messages, thinking_);
  t.room = session_.context() - int32_t(t.prompt.ids.size());
  return t;
}

GenerateResult Chat::run(const Prompt& p, const GenerateOptions& o, double preprocess_ms,
                         const std::function<bool(std::string_view)>& on_text) {
  TurnStats ts;
  std::unique_ptr<Generator> gen = conv_.start(p, o, &ts);
  try {
    run_to_end(*gen, [&](std::string_view t) { return !on_text || on_text(t); });
  } catch (...) {
    conv_.reset();  // the session holds an unknown part of the turn
    throw;
  }
  conv_.finish(*gen);
  GenerateResult r = std::move(gen->result());
  stats_ = ReplyStats{.prompt_tokens = r.prompt_tokens,
                      .reused_tokens = r.reused_tokens,
                      .generated_tokens = int32_t(r.tokens.size()),
                      .images = ts.images,
                      .tiles = ts.tiles,
                      .image_tokens = ts.image_tokens,
                      .preprocess_ms = preprocess_ms,
                      .vision_ms = ts.vision_ms,
                      .prefill_ms = r.prefill_ms,
                      .decode_ms = r.decode_ms,
                      .ttft_ms = preprocess_ms + ts.vision_ms + r.prefill_ms,
                      .stop = r.stop};
  return r;
}

GenerateResult Chat::reply(const Turn& t, GenerateOptions o,
                           const std::function<bool(std::string_view)>& on_text) {
  for (const auto& s : a_.model().chat_template().stop_strings) o.stop_strings.push_back(s);
  GenerateResult r = run(t.prompt, o, t.preprocess_ms, on_text);
  history_ = t.messages;
  history_.push_back({"assistant", r.text, {}});
  pending_.clear();
  return r;
}

GenerateResult Chat::send(const std::string& user_text, const GenerateOptions& o,
                          const std::function<bool(std::string_view)>& on_text) {
  return reply(turn(user_text), o, on_text);
}

GenerateResult Chat::complete(const Prompt& raw, const GenerateOptions& o,
                              const std::function<bool(std::string_view)>& on_text) {
  return run(raw, o, 0, on_text);
}

BeamReply Chat::beam_reply(const Turn& t, BeamOptions o, BeamResult* search) {
  if (o.context == 0) o.context = session_.context();
  const double vision_before = a_.vision() ? a_.vision()->stats().vision_ms : 0;
  if (!t.prompt.images.empty()) {
    // The prompt's rows as a Conversation evaluates them (image features, and the family's 3D
    // positions and DeepStack rows), into the first beam's session.
    o.prefill = [&](Session& s) { return eval_prompt(s, a_.vision(), t.prompt); };
  }
  const BeamResult r = beam_search(a_.engine(), t.prompt.ids, o);
  const std::vector<int32_t>& stops = o.eos_ids.empty() ? a_.model().stop_ids() : o.eos_ids;
  const BeamHypothesis& best = r.hypotheses.front();
  BeamReply reply = best.finished ? edgevl::beam_reply(a_.model(), best, stops) : BeamReply{};
  int32_t image_tokens = 0;
  for (const auto& run : t.prompt.images) image_tokens += int32_t(run.count);
  // The vision graph ran inside the prefill: its share is split out of prefill_ms.
  const double vision_ms = a_.vision() ? a_.vision()->stats().vision_ms - vision_before : 0;
  stats_ = ReplyStats{
      .prompt_tokens = int32_t(t.prompt.ids.size()),
      .generated_tokens = int32_t(reply.tokens.size()),
      .images = int32_t(std::count_if(t.prompt.images.begin(), t.prompt.images.end(),
                                      [](const Prompt::ImageRun& r) { return r.offset == 0; })),
      .tiles = t.prompt.tiles,
      .image_tokens = image_tokens,
      .preprocess_ms = t.preprocess_ms,
      .vision_ms = vision_ms,
      .prefill_ms = r.prefill_ms - vision_ms,
      .decode_ms = r.decode_ms + r.select_ms + r.reorder_ms,
      .ttft_ms = t.preprocess_ms + r.prefill_ms,
      .stop = r.cancelled     ? StopReason::Cancelled
              : reply.stopped ? StopReason::StopToken
                              : StopReason::Length};
  if (search) *search = r;
  return reply;
}

void Chat::reset() {
  conv_.reset();
  history_.clear();
  pending_.clear();
}

}  // namespace edgevl
