#pragma once
// Speculative decoding: cheap guesses of the next tokens, checked k at a time by one pass of
// the target model (Engine::verify: the weights are read once for all k rows, which is what
// makes a guess nearly free when decode is bound by reading them).
//
// Drafts come from prompt lookup (the context's last n-gram found earlier in the context:
// what followed it there; free, strong when the output copies the input: OCR, code edits,
// summaries that quote) or from a small draft model with the same tokenizer. Each step
// evaluates [last token, d1..dk] and walks the rows: d_i is accepted with probability
// min(1, p(d_i) / q(d_i)) (Leviathan et al. 2023, Chen et al. 2023), p the target's
// distribution after the sampler (penalties, top-k/p, min-p, temperature), q the draft's
// (a point mass for lookup drafts); at the first rejection a token is drawn from
// norm(max(0, p - q)) and the rest is dropped, its KV rows rolled back (Session::truncate).
// The output follows the sampler's distribution exactly; greedy (p a point mass on the
// argmax) gives the tokens plain greedy decoding gives, up to the rounding differences of
// the multi-row pass (none for Q8 / Q4 matrices on the batched path: Engine::verify).
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/decoding/generate.h"
#include "runtime/decoding/sampler.h"
#include "runtime/execution/session.h"

namespace edgevl {

// A small model proposing tokens for a larger one: its own session (and engine), kept in step
// with the target's context (only the tokens it does not hold yet are evaluated).
class DraftModel {
 public:
  // Refuses a draft whose tokenizer differs from the target's, naming both files.
  DraftModel(const Model& draft, const Model& target, SessionOptions opts = {});
  ~DraftModel();
  // Up to k tokens continuing `context` (prompt and generated tokens), each drawn from the
  // draft's distribution under `sampler`'s parameters; (*q)[i] is the distribution token i
  // was drawn from. Fewer when the draft's context is full.
  void propose(std::span<const int32_t> context, int32_t k, Sampler& sampler,
               std::vector<int32_t>* tokens, std::vector<std::vector<TokenProb>>* q);
  Session& session() { return *session_; }
  // Draws drafts at this temperature instead of the target sampler's (its other parameters
  // kept): q then differs from p, which the acceptance rule corrects for (tests use it to
  // exercise the residual draws; a flatter draft can also raise acceptance at low
  // temperatures). <= 0 with a sampling target: greedy drafts.
  void set_temperature(float t) { temperature_ = t; }

 private:
  std::unique_ptr<Session> session_;
  std::unique_ptr<Sampler> own_;  // with set_temperature: seeded from the target's sampler
  std::optional<float> temperature_;
  std::vector<int32_t> held_;  // what the draft's KV cache holds
  SessionMark mark_;           // recurrent drafts: where the last drafts began
};

// Prompt lookup: the longest suffix of `context` of n <= max_ngram tokens (n >= 1) that also
// occurs earlier (the latest such occurrence wins) proposes the up to k tokens that followed
// it. Returns the number written to *out (0: no match).
int32_t lookup_draft(std::span<const int32_t> context, int32_t max_ngram, int32_t k,
                     std::vector<int32_t>* out);

// The acceptance rule for one drafted token d: p the target's distribution, q the draft's
// (empty: d was proposed with certainty, as by lookup). `scratch` is a per-token buffer of at
// least the vocabulary size, all zero (left zero).
struct SpecVerdict {
  bool accepted = false;
  int32_t token = -1;  // d when accepted, else the replacement drawn from norm(max(0, p - q))
};
SpecVerdict speculative_accept(std::span<const TokenProb> p, std::span<const TokenProb> q,
                               int32_t d, Sampler& sampler, std::vector<float>* scratch);

// Drives a prefilled generator to its end (the loop of generate(), with o.speculative on):
// pieces of text go to on_text as generate() sends them. The KV cache is left holding the
// prompt and a prefix of the generated tokens (Conversation::finish's contract).
void run_speculative(Generator& g, const SpeculativeOptions& o,
                     const std::function<void(std::string_view)>& on_text);

}  // namespace edgevl
