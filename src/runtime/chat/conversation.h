#pragma once
// A conversation on a session: messages (text, and images for VLMs) in, a generated reply out.
// Every call renders the whole conversation with the model's chat template, the way the
// reference chat() does, and feeds the session only what differs from what it already holds:
// the longest common prefix (token ids, and the content key of every image position) stays in
// the KV cache. A follow-up turn, or a server request that extends an earlier one, costs its
// new tokens only; images whose positions are kept never run through the vision tower again.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/decoding/generate.h"
#include "runtime/execution/session.h"
#include "runtime/execution/vision_encoder.h"

namespace edgevl {

struct Message {
  std::string role;  // "system", "user", "assistant"
  std::string content;
  // Placed at the content's <image> placeholders in order (a video, PreparedImage::is_video:
  // at <video>); when it has none, one placeholder per image is put in front
  // (ImageProcessor::default_placeholder: InternVL's chat() writes
  // "<image>\n", Qwen-VL's template puts the image part right before the text).
  std::vector<ImageRef> images;
};

// A prompt ready to evaluate: token ids, and for every image the run of image-token positions
// its features fill (<IMG_CONTEXT>, <|image_pad|>). A family with 3D rotary positions derives
// them from the ids and the images' grids (prompt_rows).
struct Prompt {
  struct ImageRun {
    int64_t first = 0;  // position of its first image token
    int64_t count = 0;  // the image's tokens (InternVL: tiles * tokens_per_tile)
    ImageRef image;
    int64_t offset = 0;  // its first row of the image's features (a video: its group's)
  };
  std::vector<int32_t> ids;
  std::vector<ImageRun> images;
  int32_t tiles = 0;
};

// Renders and tokenizes `messages` (with the generation prompt) and places the images; checks
// placeholders against images and <IMG_CONTEXT> tokens against features. No graph runs.
// thinking false: the template's reply opening with thinking off (ChatTemplate::render).
Prompt build_chat_prompt(const Model& m, const std::vector<Message>& messages,
                         bool thinking = true);
// Raw text, no template (BOS when the tokenizer adds one and add_bos).
Prompt build_raw_prompt(const Model& m, const std::string& text, bool add_bos);

// The rows of prompt positions [from, ids.size()): token embeddings with the image features
// spliced in (computed through `vision` when not yet known), and what an image prompt adds to
// them (3D positions of every row when the family's images take them, DeepStack rows at the
// image positions).
struct PromptRows {
  std::vector<float> embeddings;  // [n][hidden]
  PromptMultimodal mm;            // empty unless the prompt has 3D positions
};
PromptRows prompt_rows(Engine& e, VisionEncoder* vision, const Prompt& p, int64_t from = 0);
// Evaluates all of `p` into the empty session `s` as a Conversation does (image features, 3D
// positions and DeepStack rows where the family has them) and returns the last row's logits:
// the prefill of a beam search over an image prompt (BeamOptions::prefill).
std::span<const float> eval_prompt(Session& s, VisionEncoder* vision, const Prompt& p);
// The embedding rows alone, for callers that evaluate them as plain rows (calibration, the
// quantization report): throws for a prompt that needs 3D positions.
std::vector<float> prompt_embeddings(Engine& e, VisionEncoder* vision, const Prompt& p,
                                     int64_t from = 0);

struct TurnStats {
  int32_t prompt_tokens = 0;
  int32_t reused_tokens = 0;  // of prompt_tokens, already in the KV cache
  int32_t images = 0, tiles = 0, image_tokens = 0;
  int64_t tiles_encoded = 0;  // through the vision graph (the rest came from caches)
  double vision_ms = 0;       // this turn's vision graph time
};

class Conversation {
 public:
  // `vision` may be null for text-only models (and then images are refused).
  explicit Conversation(Session& session, VisionEncoder* vision = nullptr);
  // Drops a mark the session would still take into prompt_mark_ (a prompt cut short).
  ~Conversation();
  Conversation(const Conversation&) = delete;
  Conversation& operator=(const Conversation&) = delete;

  Session& session() { return session_; }
  VisionEncoder* vision() { return vision_; }

  // The assistant's reply to `messages` (the whole conversation so far, ending with a user
  // message). The model's stop strings are added to o.stop_strings.
  GenerateResult reply(const std::vector<Message>& messages, GenerateOptions o,
                       const std::function<void(std::string_view)>& on_text = {},
                       TurnStats* stats = nullptr);
  // A continuation of raw text (no template).
  GenerateResult complete(const std::string& text, bool add_bos, const GenerateOptions& o,
                          const std::function<void(std::string_view)>& on_text = {},
                          TurnStats* stats = nullptr);
  // Runs `p` as the prompt: evaluates what differs from the held prefix, then generates.
  GenerateResult run(const Prompt& p, const GenerateOptions& o,
                     const std::function<void(std::string_view)>& on_text = {},
                     TurnStats* stats = nullptr);

  // The same one step at a time (a scheduler interleaving several conversations): start()
  // keeps the shared prefix and prefills the rest; drive the generator (Generator's contract);
  // then finish() records what the session holds. A generator cancelled midway is fine.
  // With `defer_prefill` the generator comes back with its prompt still to evaluate
  // (Generator::prefill_continue): image features are ready, nothing else has run.
  std::unique_ptr<Generator> start(const Prompt& p, const GenerateOptions& o,
                                   TurnStats* stats = nullptr, bool defer_prefill = false);
  void finish(const Generator& g);

  // Tokens `p` shares with what the session holds (what run() would not evaluate again). With
  // a recurrent state (Qwen3.5's linear-attention layers) that is the whole held sequence, or
  // the end of the last prompt (marked there: a chat's next turn continues it), or nothing.
  int32_t shared_prefix(const Prompt& p) const;
  // Forgets everything held (the next call prefills from the start).
  void reset();

 private:
  Session& session_;
  VisionEncoder* vision_;
  // What the session's KV cache holds, position by position: token id, and the content key
  // of the image a <IMG_CONTEXT> position belongs to (0 for text).
  std::vector<int32_t> held_ids_;
  std::vector<uint64_t> held_keys_;
  // Recurrent state: the session's mark at the end of the last prompt (n_past -1: none).
  SessionMark prompt_mark_;
  // Positions where held_ids_ / held_keys_ equal p's, whatever the state allows to reuse.
  int32_t matching_prefix(const Prompt& p) const;
};

}  // namespace edgevl
