#pragma once
// The runtime's entry point: open a model as an Assistant, talk to it through Chats. `edgevl
// run`, `chat`, the server and the C API sit on this; `bench` and calibration reach lower (the
// engine and sessions) to time and record.
//
//   Assistant a("model.evb");                         // the binary, its engine, its vision
//   Chat chat(a);
//   chat.add_image(a.image_file("photo.jpg"));         // attached to the next user message
//   chat.send("What is in the picture?", options, [](std::string_view t) { ...; return true; });
//   chat.send("And the colour?", options);             // only the new tokens are evaluated
//   chat.last_stats();                                 // tokens, timings, images of that reply
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/chat/conversation.h"
#include "runtime/constraints/token_constraint.h"
#include "runtime/decoding/beam_search.h"
#include "runtime/decoding/generate.h"
#include "runtime/execution/engine.h"
#include "runtime/execution/model.h"
#include "runtime/execution/vision_encoder.h"

namespace edgevl {

struct AssistantOptions {
  int threads = 0;              // 0: the physical cores
  std::string backend = "cpu";  // EngineOptions::backend
  ImageOptions images;          // decoding and tiling limits, the feature cache
};

// A model opened to answer: the mapped binary, the engine that runs its graphs and, for a VLM,
// its vision encoder. One caller at a time drives it (a server serialises its requests).
class Assistant {
 public:
  explicit Assistant(const std::filesystem::path& model, const AssistantOptions& o = {});
  Assistant(const Assistant&) = delete;
  Assistant& operator=(const Assistant&) = delete;

  const Model& model() const { return *model_; }
  Engine& engine() { return *engine_; }
  VisionEncoder* vision() { return vision_.get(); }  // null for a text-only model
  bool has_vision() const { return vision_ != nullptr; }

  // An image decoded and tiled for a prompt (encoded when a reply first needs it). Throws for a
  // text-only model or an image it cannot take (format, size), naming `what`.
  ImageRef image_file(const std::filesystem::path& path);
  // A video (Qwen-VL): frames sampled and preprocessed; attached like an image (add_image), it
  // takes a <video> placeholder, or goes before the text.
  ImageRef video_file(const std::filesystem::path& path);
  ImageRef video_bytes(std::span<const uint8_t> encoded, const std::string& what);
  ImageRef image_bytes(std::span<const uint8_t> encoded, const std::string& what = "image bytes");
  ImageRef image_rgb(int width, int height, std::span<const uint8_t> rgb);

  // The prompt of `messages` through the model's chat template (generation prompt added), or
  // of raw text; checks images against placeholders and the model's image tokens.
  Prompt chat_prompt(const std::vector<Message>& messages, bool thinking = true) const;
  Prompt raw_prompt(const std::string& text, bool add_bos = true) const;

  // The vocabulary's token trie for constrained output, built at the first call.
  std::shared_ptr<const TokenVocabulary> vocabulary();

 private:
  void need_vision(const std::string& what) const;

  std::unique_ptr<Model> model_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<VisionEncoder> vision_;
  std::shared_ptr<const TokenVocabulary> vocab_;
};

// What one reply cost and carried.
struct ReplyStats {
  int32_t prompt_tokens = 0, reused_tokens = 0, generated_tokens = 0;
  int32_t images = 0, tiles = 0, image_tokens = 0;
  double preprocess_ms = 0;  // decoding and tiling this turn's images
  double vision_ms = 0;      // their tiles through the vision graph
  double prefill_ms = 0, decode_ms = 0;
  double ttft_ms = 0;  // preprocessing + vision + prefill
  StopReason stop = StopReason::Length;
  double prefill_tokens_per_s() const;  // of the tokens evaluated (not the reused ones)
  double decode_tokens_per_s() const;   // of the tokens after the first
};

// One user turn, ready to answer: the conversation with it, and its prompt.
struct Turn {
  std::vector<Message> messages;  // the history, then this user message
  Prompt prompt;
  double preprocess_ms = 0;
  int32_t room = 0;  // tokens the context has left after the prompt
};

// A conversation with an assistant: an optional system message, the history, images waiting
// for the next user message, and a session whose KV cache holds what was already evaluated (a
// follow-up evaluates its new tokens only). A turn joins the history only once answered: a
// failed or refused turn leaves no trace.
class Chat {
 public:
  explicit Chat(Assistant& a, int32_t context = 0);  // context 0: as compiled

  void set_system(std::string text) { system_ = std::move(text); }
  // Off: replies open with the template's thinking-off block (Qwen3.5's empty think block).
  void set_thinking(bool on) { thinking_ = on; }
  void add_image(ImageRef image);  // attached to the next user message
  const std::vector<Message>& history() const { return history_; }
  int32_t context() const { return session_.context(); }

  // `user_text` as the next user message (with the waiting images), rendered and tokenized; no
  // graph runs. Throws for a prompt the model cannot take (placeholders, image tokens).
  Turn turn(const std::string& user_text) const;
  // The assistant's reply to a turn from turn(): the model's stop strings are added to
  // o.stop_strings; text streams to on_text (false from it stops the reply: Cancelled). On
  // success the turn and the reply join the history and the images are used up.
  GenerateResult reply(const Turn& t, GenerateOptions o,
                       const std::function<bool(std::string_view)>& on_text = {});
  // turn() and reply() in one.
  GenerateResult send(const std::string& user_text, const GenerateOptions& o,
                      const std::function<bool(std::string_view)>& on_text = {});
  // A continuation of raw text (no template; the history is not touched).
  GenerateResult complete(const Prompt& raw, const GenerateOptions& o,
                          const std::function<bool(std::string_view)>& on_text = {});
  // Beam search over a turn (its images too), its best hypothesis as text; the history is not
  // touched. stop ids: BeamOptions::eos_ids, or the model's.
  BeamReply beam_reply(const Turn& t, BeamOptions o, BeamResult* search = nullptr);

  const ReplyStats& last_stats() const { return stats_; }
  // Forgets the history, the waiting images and what the session holds.
  void reset();

  Session& session() { return session_; }

 private:
  GenerateResult run(const Prompt& p, const GenerateOptions& o, double preprocess_ms,
                     const std::function<bool(std::string_view)>& on_text);

  Assistant& a_;
  Session session_;
  Conversation conv_;
  std::string system_;
  bool thinking_ = true;
  std::vector<Message> history_;
  std::vector<ImageRef> pending_;
  ReplyStats stats_;
};

}  // namespace edgevl
