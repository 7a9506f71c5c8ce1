#pragma once
// The token loop: prefill the prompt, then sample / decode until n tokens, a stop token or
// a stop string. Streams text that is always whole UTF-8 and never shows a stop string.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/constraints/token_constraint.h"
#include "runtime/decoding/sampler.h"
#include "runtime/execution/session.h"

namespace edgevl {

class DraftModel;

// The logits of the tokens the tokenizer spells: a model's vocabulary may be padded past its
// tokenizer's (Qwen2: 151,936 rows for 151,646 tokens), and a padding row has no text, so the
// samplers never draw one (a random-weight model's padding rows can win the argmax).
inline std::span<const float> spelled_logits(const Model& m, std::span<const float> logits) {
  return logits.first(std::min(logits.size(), size_t(m.tokenizer().vocab_size())));
}

// Speculative decoding (runtime/decoding/speculative.h): drafted tokens verified k at a time in one
// pass of the target model. Off unless lookup > 0 or draft is set; the output keeps the
// sampler's distribution (greedy: the same tokens as without it).
struct SpeculativeOptions {
  int32_t lookup = 0;           // prompt lookup: longest n-gram (<= lookup) of the context's end
                                // found earlier in the context proposes what followed it
  DraftModel* draft = nullptr;  // a small model with the target's tokenizer proposes tokens
  int32_t draft_k = 8;          // tokens drafted per step (at most)
  bool enabled() const { return lookup > 0 || draft != nullptr; }
};

struct GenerateOptions {
  int32_t n_predict = 128;
  SamplerParams sampling;
  std::vector<std::string> stop_strings;  // in addition to the model's stop tokens
  bool ignore_eos = false;                // keep going past stop tokens (tests, benchmarks)
  SpeculativeOptions speculative;
  // Holds the output to an automaton's language (e.g. a JSON schema's documents): disallowed
  // tokens are masked before the sampler, the generation ends when the document is complete,
  // and it always completes within n_predict tokens (stop tokens only where it may end; stop
  // strings are not applied: the document's end is the stop). Not with speculative decoding.
  std::shared_ptr<const TokenConstraint> constraint;
  // Log-probabilities of the generated tokens (GenerateResult::logprobs) and of the `logprobs`
  // most likely tokens at each step; -1: none. Of the logits the sampler starts from (logit
  // bias, penalties and the constraint's mask applied; temperature 1). Sampled steps only (a
  // speculative pass's accepted drafts have none).
  int32_t logprobs = -1;
};

enum class StopReason { Length, StopToken, StopString, Cancelled };
const char* stop_reason_name(StopReason r);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (a stop token is not included)
  std::string text;
  int32_t prompt_tokens = 0;
  int32_t reused_tokens = 0;  // of prompt_tokens, kept in the KV cache from before
  double prefill_ms = 0;
  double decode_ms = 0;  // for tokens after the first
  StopReason stop = StopReason::Length;
  // Speculative decoding: verification passes of the target, tokens drafted and accepted, and
  // passes whose kept rows ran again (a model with recurrent state, after a rejection).
  int32_t spec_passes = 0, spec_drafted = 0, spec_accepted = 0, spec_replays = 0;
  // Constrained generation: time spent masking logits (token tables built at a state's first
  // visit included) and steps masked.
  double constraint_ms = 0;
  int32_t constraint_steps = 0;
  std::vector<TokenLogprob> logprobs;  // with GenerateOptions::logprobs >= 0: one per token
};

// What an image prompt adds to its rows' evaluation (Session::eval_multimodal), for the prompt
// positions a Generator evaluates (those after the reused ones).
struct PromptMultimodal {
  std::vector<int32_t> rope_thw;  // [fresh][3] (t, h, w); empty: the rows' own positions
  std::vector<float> deepstack;   // [layers][fresh][hidden]; empty: none
  int32_t layers = 0;
};

// The token loop one step at a time, so that a scheduler can interleave (or batch) the decode
// steps of several sequences: prefill(), then while step() asks for it, evaluate next_token()
// on the session (alone or in a batch) and hand the logits back with set_logits().
class Generator {
 public:
  Generator(Session& s, const GenerateOptions& o);
  ~Generator();
  // Evaluates the prompt as generate() does (same `prompt_embeds` / `reused` contract).
  void prefill(std::span<const int32_t> prompt, const float* prompt_embeds = nullptr,
               int32_t reused = 0);
  // The same in pieces, so that a scheduler can run other sequences' decode steps between
  // them: prefill_begin() takes what prefill() takes (the embeddings are kept here), each
  // prefill_continue() evaluates at most `max_tokens` more and returns true once the whole
  // prompt is in (step() may then run). Pieces that are multiples of the model's prefill chunk
  // run the same graph executions as one prefill(): the logits are identical.
  // `mm` (with prompt_embeds only): the rows' 3D positions and DeepStack rows.
  void prefill_begin(std::span<const int32_t> prompt, std::vector<float> prompt_embeds = {},
                     int32_t reused = 0, PromptMultimodal mm = {});
  bool prefill_continue(int64_t max_tokens);
  bool prefilling() const { return pending_ > 0; }
  // Samples from the current logits and appends the text it completes to `emit` (whole UTF-8,
  // never a stop string). True when the generation goes on: next_token() must be evaluated
  // and its logits given to set_logits() before the next step. False: finished (result()).
  bool step(std::string* emit);
  // The part of step() after the draw: `tok` is the next token (chosen by the caller, e.g. a
  // speculative verifier from sampler()'s distribution). Same return and emit contract.
  bool accept(int32_t tok, std::string* emit);
  Sampler& sampler() { return sampler_; }
  // Prompt and generated tokens so far (what the penalties look at).
  std::span<const int32_t> history() const { return history_; }
  const GenerateOptions& options() const { return o_; }
  int32_t next_token() const { return next_; }
  void set_logits(std::span<const float> logits) { logits_ = logits; }
  // Stops early (a client went away, a time limit): the held-back text is dropped.
  void cancel(StopReason why);
  bool done() const { return done_; }
  Session& session() { return s_; }
  const GenerateResult& result() const { return r_; }
  GenerateResult& result() { return r_; }

 private:
  void finish(std::string* emit);

  Session& s_;
  GenerateOptions o_;
  struct Text;  // stream decoder + stop-string filter
  std::unique_ptr<Text> text_;
  Sampler sampler_;
  std::vector<int32_t> history_;
  std::span<const float> logits_;
  GenerateResult r_;
  int32_t next_ = -1, steps_ = 0;
  bool done_ = false;
  int32_t cstate_ = 0;                   // the constraint's automaton state
  std::vector<float> masked_;            // the logits after the constraint's mask
  std::vector<float> adjusted_;          // ... and the sampler's bias and penalties (logprobs)
  std::optional<TokenLogprob> sampled_;  // the last sampled token's, until accept() keeps it
  std::chrono::steady_clock::time_point t_decode_;
  // A prefill in progress: fresh prompt tokens not yet evaluated, and where they start.
  std::vector<int32_t> prompt_fresh_;
  std::vector<float> embeds_;  // rows of prompt_fresh_ (empty: token ids)
  const float* embeds_ptr_ = nullptr;
  PromptMultimodal mm_;
  std::vector<float> deepstack_chunk_;  // mm_.deepstack's rows of one prefill_continue()
  int64_t evaluated_ = 0, pending_ = 0, fresh_ = 0;
};

// Checks prompt + n_predict against the session's free context; throws a clear message.
void check_fits_context(const Session& s, int64_t prompt_tokens, int64_t n_predict,
                        const std::string& model_path);

}  // namespace edgevl
