#pragma once
// Beam search with the semantics of transformers' generate(num_beams=N, do_sample=False,
// length_penalty, early_stopping) (the reference; golden-tested by beam_search_test against
// tools/golden/make_beam_goldens.py):
//  - each step takes the top K = max(2, 1 + #eos) * N (beam, token) candidates by summed
//    log-softmax score (float32), best first;
//  - a candidate ending in an EOS id, or reaching max_new_tokens, "hits a stop": those among
//    the first N become finished hypotheses scored sum_logprobs / generated_len^length_penalty
//    (generated_len counts the new tokens, EOS included, not the prompt), kept if they rank
//    among the N best finished; the N best candidates that did not hit run on;
//  - early_stopping True ends the search once N hypotheses are finished; False ends it when the
//    best running beam, scored at the current length, cannot beat the worst finished one;
//    Never does the same but, for length_penalty > 0, scores the running beam at the longest
//    length it could reach (max_new_tokens). The reference's heuristic state is sticky: once no
//    improvement is possible no further hypothesis is admitted.
// The result is the N finished hypotheses, best first (the best running beams are finished at
// max_new_tokens, as the reference does).
//
// Engine use: the prompt is evaluated once; each beam has a Session on the same engine and the
// N beams advance together through Engine::decode_batch (one pass over the weights per step).
// Reordering moves sessions, not caches: a beam whose parent has one child keeps the parent's
// session; an extra child takes a session whose beam died and copies only the KV rows after the
// longest token prefix the two histories share (Session::copy_prefix_from), so the prompt is
// copied once per beam at the first step and afterwards only rows since the beams diverged.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runtime/execution/engine.h"

namespace edgevl {

enum class EarlyStopping { False, True, Never };

struct BeamOptions {
  int32_t num_beams = 2;
  int32_t max_new_tokens = 128;
  float length_penalty = 1.0f;
  EarlyStopping early_stopping = EarlyStopping::False;
  std::vector<int32_t> eos_ids;  // empty: the model's stop tokens
  int32_t context = 0;           // per-beam session context (0 = as compiled)
  // Polled before each decode step; true ends the search there (BeamResult::cancelled): a
  // server's client gone or its time limit past. Unset: never.
  std::function<bool()> cancelled;
  // Evaluates the prompt into the first beam's session and returns its logits (an image prompt:
  // its rows, with 3D positions and DeepStack rows where the family has them). Unset: the
  // prompt's token ids. The other beams copy its KV rows (and rope delta) from there.
  std::function<std::span<const float>(Session&)> prefill;
};

struct BeamHypothesis {
  std::vector<int32_t> tokens;  // generated ids; the EOS that ended it included
  float score = 0;              // sum of log-probabilities / length^length_penalty
  bool finished = false;        // false: a slot never filled (not possible after a full search)
};

struct BeamResult {
  std::vector<BeamHypothesis> hypotheses;  // num_beams of them, best first
  int32_t steps = 0;                       // candidate selections (decode steps = steps - 1)
  double prefill_ms = 0, decode_ms = 0;    // decode_ms: the batched decode steps only
  double select_ms = 0;                    // log-softmax, top-K, hypothesis bookkeeping
  double reorder_ms = 0;                   // moving beams between sessions (KV row copies)
  int64_t rows_copied = 0;                 // KV positions copied (all layers, K and V, count 1)
  // Ended by BeamOptions::cancelled: the hypotheses are those finished so far (slots not
  // filled have finished = false).
  bool cancelled = false;
};

// Runs the search for `prompt` on `engine` (sessions are made on it and released after).
BeamResult beam_search(Engine& engine, std::span<const int32_t> prompt, const BeamOptions& o);

// A finished hypothesis as a reply: its tokens less a final stop id (one of `stops`), and their
// text. Ids past the tokenizer's vocabulary (the LM head's padding rows, as in Qwen2) have no
// text: a trained model never picks them, a random-weight one may; they stay in `tokens`.
struct BeamReply {
  std::vector<int32_t> tokens;
  std::string text;
  bool stopped = false;  // it ended in a stop id (removed from tokens)
};
BeamReply beam_reply(const Model& m, const BeamHypothesis& h, std::span<const int32_t> stops);

// "true" / "false" / "never" (as the reference spells early_stopping).
EarlyStopping parse_early_stopping(const std::string& s);

}  // namespace edgevl
