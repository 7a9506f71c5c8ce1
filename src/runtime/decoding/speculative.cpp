#include "runtime/decoding/speculative.h"

#include <algorithm>

#include "core/error.h"

namespace edgevl {

DraftModel::DraftModel(const Model& draft, const Model& target, SessionOptions opts) {
  const auto& dt = draft.tokenizer();
  const auto& tt = target.tokenizer();
  const std::string& dp = draft.file().path();
  const std::string& tp = target.file().path();
  check(
      draft.config().vocab_size == target.config().vocab_size && dt.vocab_size() == tt.vocab_size(),
      "draft model {} has a vocabulary of {} tokens ({} logits), target {} has {} ({} logits): "
      "a draft model must use the target's tokenizer",
      dp, dt.vocab_size(), draft.config().vocab_size, tp, tt.vocab_size(),
      target.config().vocab_size);
  for (int32_t id = 0; id < tt.vocab_size(); ++id)
    check(dt.token_bytes(id) == tt.token_bytes(id) && dt.is_special(id) == tt.is_special(id),
          "draft model {} and target {} have different tokenizers (token {}: '{}' vs '{}'): a "
          "draft model must use the target's tokenizer",
          dp, tp, id, dt.piece(id), tt.piece(id));
  session_ = std::make_unique<Session>(draft, opts);
}

DraftModel::~DraftModel() = default;

void DraftModel::propose(std::span<const int32_t> context, int32_t k, Sampler& sampler,
                         std::vector<int32_t>* tokens, std::vector<std::vector<TokenProb>>* q) {
  tokens->clear();
  q->clear();
  if (temperature_) {  // the target's parameters of this call, seeded from its generator
    SamplerParams sp = sampler.params();
    sp.temperature = *temperature_;
    sp.seed = uint64_t(sampler.uniform() * 9e18) + 1;
    own_ = std::make_unique<Sampler>(sp);
  }
  Sampler& draw_with = own_ ? *own_ : sampler;
  Session& s = *session_;
  // Keep the prefix the draft already holds; evaluate the rest of the context.
  size_t keep = 0;
  while (keep < held_.size() && keep < context.size() && held_[keep] == context[keep]) ++keep;
  if (keep == context.size()) --keep;  // the last token's logits are needed: evaluate it again
  if (!s.has_recurrent_state()) {
    s.truncate(int32_t(keep));
  } else if (keep < held_.size()) {
    // A recurrent state goes back only to a mark: the end of the last call's context, where
    // its drafts began (the accepted ones are evaluated again from there), else the start.
    if (mark_.n_past >= 0 && size_t(mark_.n_past) <= keep) {
      s.rewind(mark_);
      keep = size_t(mark_.n_past);
    } else {
      s.reset();
      keep = 0;
    }
  }
  held_.resize(keep);
  const auto fresh = context.subspan(keep);
  if (int64_t(s.n_past()) + int64_t(fresh.size()) + 1 > s.context()) return;  // no room: no drafts
  std::span<const float> logits = s.eval_tokens(fresh);
  held_.insert(held_.end(), fresh.begin(), fresh.end());
  if (s.has_recurrent_state()) s.mark(&mark_);
  // The draft's history for its penalties: the context and what it drafted so far.
  std::vector<int32_t> history(context.begin(), context.end());
  for (int32_t i = 0; i < k; ++i) {
    const auto d = draw_with.distribution(spelled_logits(s.model(), logits), history);
    const int32_t tok = draw_with.draw(d);
    tokens->push_back(tok);
    q->emplace_back(d.begin(), d.end());
    history.push_back(tok);
    if (i + 1 == k || s.n_past() + 1 > s.context()) break;
    logits = s.eval_tokens(std::span<const int32_t>(&tok, 1));
    held_.push_back(tok);
  }
}

int32_t lookup_draft(std::span<const int32_t> context, int32_t max_ngram, int32_t k,
                     std::vector<int32_t>* out) {
  out->clear();
  const int64_t len = int64_t(context.size());
  if (k <= 0 || len < 2) return 0;
  for (int64_t n = std::min<int64_t>(max_ngram, len - 1); n >= 1; --n) {
    const int32_t* suffix = context.data() + (len - n);
    // Latest earlier occurrence: start j with j + n <= len - 1 (it must be followed by a token).
    for (int64_t j = len - n - 1; j >= 0; --j) {
      if (!std::equal(suffix, suffix + n, context.data() + j)) continue;
      const int64_t from = j + n, to = std::min<int64_t>(len, from + k);
      out->assign(context.begin() + from, context.begin() + to);
      return int32_t(out->size());
    }
  }
  return 0;
}

SpecVerdict speculative_accept(std::span<const TokenProb> p, std::span<const TokenProb> q,
                               int32_t d, Sampler& sampler, std::vector<float>* scratch) {
  float pd = 0, qd = q.empty() ? 1.f : 0.f;
  for (const auto& t : p)
    if (t.id == d) pd = t.p;
  for (const auto& t : q)
    if (t.id == d) qd = t.p;
  // Accept with probability min(1, p/q); pd >= qd always accepts without a draw (greedy runs
  // consume no randomness).
  if (pd > 0.f && (pd >= qd || sampler.uniform() * double(qd) < double(pd))) return {true, d};
  // Rejected: draw from the residual max(0, p - q), renormalised.
  std::vector<float>& qv = *scratch;
  if (q.empty()) {
    qv[size_t(d)] = 1.f;
  } else {
    for (const auto& t : q) qv[size_t(t.id)] = t.p;
  }
  std::vector<TokenProb> residual;
  residual.reserve(p.size());
  for (const auto& t : p) {
    const float r = t.p - qv[size_t(t.id)];
    if (r > 0.f) residual.push_back({r, t.id});
  }
  if (q.empty()) {
    qv[size_t(d)] = 0.f;
  } else {
    for (const auto& t : q) qv[size_t(t.id)] = 0.f;
  }
  // p <= q everywhere cannot reject in exact arithmetic; with rounding, fall back to p.
  return {false, residual.empty() ? sampler.draw(p) : sampler.draw(residual)};
}

void run_speculative(Generator& g, const SpeculativeOptions& o,
                     const std::function<void(std::string_view)>& on_text) {
  check(o.draft_k >= 1, "--draft-k must be at least 1 (got {})", o.draft_k);
  check(o.lookup >= 0, "--lookup must be >= 0 (got {})", o.lookup);
  Session& s = g.session();
  Engine& e = s.engine();
  // A model with recurrent state (Gated DeltaNet layers) cannot truncate: each pass marks the
  // position before verification, and when drafts are rejected it rewinds there and runs the
  // kept rows again (on the same path, so the state is what plain decoding would hold).
  const bool recurrent = s.has_recurrent_state();
  SessionMark before;
  const size_t vocab = size_t(s.model().config().vocab_size);
  const int32_t n_predict = g.options().n_predict;
  GenerateResult& r = g.result();
  std::string piece;
  auto emit = [&] {
    if (!piece.empty() && on_text) on_text(piece);
  };
  // The first token comes from the prompt's logits, as in the plain loop.
  bool more = g.step(&piece);
  emit();
  std::vector<int32_t> drafts, rows;
  std::vector<std::vector<TokenProb>> q;
  std::vector<float> logits, scratch(vocab, 0.f);
  while (more) {
    // The last token is not in the KV cache yet: it is row 0 of the pass, its drafts follow.
    const int32_t last = g.next_token();
    const int32_t left = n_predict - int32_t(r.tokens.size());  // tokens still to produce
    const int32_t room = s.context() - s.n_past() - 1;
    const int32_t k = std::min({o.draft_k, left - 1, room});
    drafts.clear();
    q.clear();
    if (k > 0) {
      if (o.draft)
        o.draft->propose(g.history(), k, g.sampler(), &drafts, &q);
      else
        lookup_draft(g.history(), o.lookup, k, &drafts);
    }
    rows.assign(1, last);
    rows.insert(rows.end(), drafts.begin(), drafts.end());
    logits.resize(rows.size() * vocab);
    const int32_t n0 = s.n_past();
    if (recurrent && !drafts.empty()) s.mark(&before);  // no drafts: nothing to reject
    e.verify(s, rows, logits.data());
    r.spec_passes += 1;
    r.spec_drafted += int32_t(drafts.size());
    auto row = [&](size_t i) {
      return spelled_logits(s.model(), std::span<const float>(logits.data() + i * vocab, vocab));
    };
    size_t kept = 0;  // drafts accepted and fed (their KV rows stay)
    bool rejected = false;
    for (size_t i = 0; i < drafts.size() && more; ++i) {
      const auto p = g.sampler().distribution(row(i), g.history());
      const SpecVerdict v = speculative_accept(
          p, q.empty() ? std::span<const TokenProb>{} : std::span<const TokenProb>(q[i]), drafts[i],
          g.sampler(), &scratch);
      more = g.accept(v.token, &piece);
      emit();
      if (!v.accepted) {
        rejected = true;
        break;
      }
      ++kept;
      r.spec_accepted += 1;
    }
    if (more && !rejected) {  // every draft taken: the last row gives one more token
      more = g.accept(g.sampler().sample(row(drafts.size()), g.history()), &piece);
      emit();
    }
    // Roll back the rows of rejected drafts; the KV cache never holds more generated tokens
    // than the result has (an accepted stop token that ended it is not one of them).
    const int32_t to = std::min(n0 + 1 + int32_t(kept), r.prompt_tokens + int32_t(r.tokens.size()));
    if (to < s.n_past() && recurrent) {
      check(before.n_past == n0, "internal: rejected rows after a pass without drafts");
      s.rewind(before);
      if (to > n0)
        e.verify(s, std::span<const int32_t>(rows).first(size_t(to - n0)), logits.data());
      r.spec_replays += 1;
    } else {
      s.truncate(to);
    }
  }
}

}  // namespace edgevl
