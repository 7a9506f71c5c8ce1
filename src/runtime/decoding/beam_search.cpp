#include "runtime/decoding/beam_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>

#include "core/clock.h"
#include "core/error.h"
#include "runtime/execution/session.h"
#include "text/tokenizer.h"

namespace edgevl {

EarlyStopping parse_early_stopping(const std::string& s) {
  if (s == "true" || s == "1") return EarlyStopping::True;
  if (s == "false" || s == "0") return EarlyStopping::False;
  if (s == "never") return EarlyStopping::Never;
  throw Error(fmt::format("early stopping must be true, false or never, not '{}'", s));
}

namespace {

// The reference masks with additive -1e9 in float32 (not -inf), so masked values still order
// among themselves: kept literally so that even degenerate cases rank the same way.
constexpr float kMask = -1.0e9f;

// log-sum-exp of one row: the reference's float32 log_softmax is x - lse rounded to float;
// summed in double so that the only difference from it is the last rounding.
double log_sum_exp(const float* x, int64_t n) {
  const float mx = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(std::exp(x[i] - mx));
  return double(mx) + std::log(sum);
}

// The k largest logits of one row (token ids), in one pass with a small min-heap: a beam's
// best candidates are its best logits (the log-softmax and the beam's score shift them all
// alike), so the global top K needs only each beam's top K, not a sort of beams x vocabulary.
void top_logits(const float* x, int64_t n, size_t k, std::vector<int32_t>& out) {
  auto worse = [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  out.clear();
  for (int32_t t = 0; t < int32_t(n); ++t) {
    if (out.size() < k) {
      out.push_back(t);
      std::push_heap(out.begin(), out.end(), worse);
    } else if (x[t] > x[out.front()]) {
      std::pop_heap(out.begin(), out.end(), worse);
      out.back() = t;
      std::push_heap(out.begin(), out.end(), worse);
    }
  }
}

// Indices of the k largest values, best first; ties by lower index (torch.topk leaves tie order
// unspecified: a tie within float32 is the one place the reference is not deterministic).
std::vector<int32_t> top_k(std::span<const float> v, size_t k) {
  std::vector<int32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min(k, idx.size());
  auto better = [&](int32_t a, int32_t b) {
    return v[size_t(a)] > v[size_t(b)] || (v[size_t(a)] == v[size_t(b)] && a < b);
  };
  std::partial_sort(idx.begin(), idx.begin() + long(k), idx.end(), better);
  idx.resize(k);
  return idx;
}

// length^penalty as the reference computes it (Python float), applied to float32 scores.
float length_divisor(int64_t len, float penalty) {
  return float(std::pow(double(len), double(penalty)));
}

struct Beam {
  std::vector<int32_t> tokens;  // generated so far
  float score = 0;              // summed log-probabilities
  int32_t session = 0;          // whose KV cache holds prompt + tokens
};

struct Candidate {
  int32_t parent = 0, token = 0;
  float score = 0;
  bool hits = false;  // ends in EOS or reaches max_new_tokens
};

}  // namespace

BeamResult beam_search(Engine& engine, std::span<const int32_t> prompt, const BeamOptions& o) {
  const Model& m = engine.model();
  const int64_t vocab = m.config().vocab_size;
  const int32_t n_beams = o.num_beams;
  check(n_beams >= 1, "--beams must be >= 1, not {}", n_beams);
  check(o.max_new_tokens >= 1, "beam search needs -n >= 1");
  check(!prompt.empty(), "empty prompt: nothing to condition on");
  const std::vector<int32_t> eos = o.eos_ids.empty() ? m.stop_ids() : o.eos_ids;
  const size_t n_keep = size_t(std::max<int64_t>(2, 1 + int64_t(eos.size())) * n_beams);
  // The reference also draws candidates from the -1e9-scored copies of the first beam at the
  // first step; they cannot reach the top K when the vocabulary alone has K tokens.
  check(int64_t(n_keep) <= vocab, "{} beams need a vocabulary of at least {} tokens", n_beams,
        n_keep);
  auto is_eos = [&](int32_t t) { return std::find(eos.begin(), eos.end(), t) != eos.end(); };

  BeamResult r;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int32_t i = 0; i < n_beams; ++i)
    sessions.push_back(std::make_unique<Session>(engine, SessionOptions{0, o.context}));
  // Token history held by each session's KV cache (prompt included): what a copy can skip.
  std::vector<std::vector<int32_t>> held(static_cast<size_t>(n_beams));
  check(int64_t(prompt.size()) + o.max_new_tokens - 1 <= sessions[0]->context(),
        "prompt ({} tokens) + {} generated exceeds the context of {} tokens", prompt.size(),
        o.max_new_tokens, sessions[0]->context());

  auto t0 = Clock::now();
  const auto first = o.prefill ? o.prefill(*sessions[0]) : sessions[0]->eval_tokens(prompt);
  check(sessions[0]->n_past() == int32_t(prompt.size()),
        "internal: the beam prefill evaluated {} positions of a {}-token prompt",
        sessions[0]->n_past(), prompt.size());
  r.prefill_ms = ms_since(t0);
  held[0].assign(prompt.begin(), prompt.end());
  std::vector<float> logits(first.begin(), first.end());  // [beams.size()][vocab]

  std::vector<Beam> beams(1);  // the first step expands the prompt alone
  std::vector<BeamHypothesis> done(static_cast<size_t>(n_beams));
  for (auto& h : done) h.score = kMask;
  bool improvable = true;  // the reference's is_early_stop_heuristic_unsatisfied
  std::vector<float> sums;
  std::vector<int64_t> flat;
  std::vector<int32_t> best_tokens;
  std::vector<Session*> batch;
  std::vector<int32_t> batch_tokens;

  for (int32_t cur = 0;; ++cur) {  // cur: tokens each running beam has generated
    t0 = Clock::now();
    ++r.steps;
    // Candidates: (beam, token) by summed score, in float32 as the reference adds them; each
    // beam offers its top K tokens, the best K of those are the reference's top K.
    sums.clear();
    flat.clear();
    for (size_t b = 0; b < beams.size(); ++b) {
      const float* x = logits.data() + b * size_t(vocab);
      const double lse = log_sum_exp(x, vocab);
      top_logits(x, vocab, n_keep, best_tokens);
      for (int32_t t : best_tokens) {
        sums.push_back(float(double(x[t]) - lse) + beams[b].score);
        flat.push_back(int64_t(b) * vocab + t);
      }
    }
    const bool at_max = cur + 1 >= o.max_new_tokens;
    std::vector<Candidate> cands;
    // Ties (equal float32 sums) go to the lower flat index beam * vocab + token.
    std::vector<size_t> order(sums.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return sums[a] > sums[b] || (sums[a] == sums[b] && flat[a] < flat[b]);
    });
    order.resize(std::min(order.size(), n_keep));
    for (size_t i : order) {
      Candidate c{int32_t(flat[i] / vocab), int32_t(flat[i] % vocab), sums[i], false};
      c.hits = at_max || is_eos(c.token);
      cands.push_back(c);
    }
    const bool all_hit =
        std::all_of(cands.begin(), cands.end(), [](const Candidate& c) { return c.hits; });

    // Running beams for the next step: the best candidates that did not hit a stop.
    std::vector<float> run_scores;
    for (const Candidate& c : cands) run_scores.push_back(c.score + (c.hits ? kMask : 0.f));
    const std::vector<int32_t> run_idx = top_k(run_scores, size_t(n_beams));

    // Finished hypotheses: the candidates among the first N that hit a stop, length-penalised,
    // merged with those already kept; the N best stay. (The reference also masks new ones when
    // all N are finished under early_stopping True, or once no improvement is possible; for one
    // prompt either condition has already ended the search, so neither can apply here.)
    const float div = length_divisor(cur + 1, o.length_penalty);
    std::vector<float> merged;
    for (const auto& h : done) merged.push_back(h.score);
    for (size_t k = 0; k < cands.size(); ++k) {
      float s = cands[k].score / div;
      if (!(cands[k].hits && k < size_t(n_beams))) s += kMask;
      merged.push_back(s);
    }
    std::vector<BeamHypothesis> next_done;
    for (int32_t i : top_k(merged, size_t(n_beams))) {
      if (size_t(i) < done.size()) {
        next_done.push_back(done[size_t(i)]);
        continue;
      }
      const size_t k = size_t(i) - done.size();
      const Candidate& c = cands[k];
      BeamHypothesis h;
      h.tokens = beams[size_t(c.parent)].tokens;
      h.tokens.push_back(c.token);
      h.score = merged[size_t(i)];
      h.finished = c.hits && k < size_t(n_beams);
      next_done.push_back(std::move(h));
    }
    done = std::move(next_done);

    std::vector<Beam> next;
    for (int32_t i : run_idx) {
      const Candidate& c = cands[size_t(i)];
      Beam b;
      b.tokens = beams[size_t(c.parent)].tokens;
      b.tokens.push_back(c.token);
      b.score = run_scores[size_t(i)];
      b.session = -1;
      next.push_back(std::move(b));
    }

    // Whether the search goes on (after the step, at the new length, as the reference).
    const int32_t len = cur + 1;
    const bool done_full =
        std::all_of(done.begin(), done.end(), [](const BeamHypothesis& h) { return h.finished; });
    {
      const int64_t best_len =
          o.early_stopping == EarlyStopping::Never && o.length_penalty > 0 ? o.max_new_tokens : len;
      const float best_running = next[0].score / length_divisor(best_len, o.length_penalty);
      float worst = done[0].score;
      for (const auto& h : done) worst = std::min(worst, h.score);
      bool any = false;
      for (const auto& h : done) any = any || best_running > (h.finished ? worst : kMask);
      improvable = improvable && any;
    }
    const bool go_on =
        improvable && !(done_full && o.early_stopping == EarlyStopping::True) && !all_hit;
    // Candidates, parents and beams are bookkeeping on the host: counted with the selection.
    if (!go_on || (o.cancelled && o.cancelled())) {
      r.cancelled = go_on;
      r.select_ms += ms_since(t0);
      break;
    }

    // Give each new beam a session holding its parent's history: a parent's first child takes
    // the parent's session as it is; the others take sessions of beams that died, copying only
    // the rows after the longest prefix that session already shares with the parent.
    std::vector<int32_t> children(beams.size(), 0);
    std::vector<bool> used(size_t(n_beams), false);
    for (const Beam& b : beams) used[size_t(b.session)] = true;
    for (int32_t i : run_idx) ++children[size_t(cands[size_t(i)].parent)];
    std::vector<int32_t> free_sessions;
    for (size_t p = 0; p < beams.size(); ++p)
      if (children[p] == 0) free_sessions.push_back(beams[p].session);
    for (int32_t s = 0; s < n_beams; ++s)
      if (!used[size_t(s)]) free_sessions.push_back(s);
    std::vector<bool> parent_taken(beams.size(), false);
    r.select_ms += ms_since(t0);
    t0 = Clock::now();
    for (size_t j = 0; j < next.size(); ++j) {
      const int32_t p = cands[size_t(run_idx[j])].parent;
      const int32_t ps = beams[size_t(p)].session;
      if (!parent_taken[size_t(p)]) {
        parent_taken[size_t(p)] = true;
        next[j].session = ps;
        continue;
      }
      // The free session sharing the longest prefix with the parent's history.
      size_t best = 0, best_common = 0;
      for (size_t f = 0; f < free_sessions.size(); ++f) {
        const auto& a = held[size_t(free_sessions[f])];
        const auto& b = held[size_t(ps)];
        const size_t common = size_t(
            std::mismatch(a.begin(), a.begin() + long(std::min(a.size(), b.size())), b.begin())
                .first -
            a.begin());
        if (f == 0 || common > best_common) best = f, best_common = common;
      }
      const int32_t fs = free_sessions[best];
      free_sessions.erase(free_sessions.begin() + long(best));
      const int32_t n = int32_t(held[size_t(ps)].size());
      // A session may hold more than its history says only if it ran further; truncate first.
      const int32_t keep = std::min<int32_t>(int32_t(best_common), sessions[size_t(fs)]->n_past());
      sessions[size_t(fs)]->copy_prefix_from(*sessions[size_t(ps)], n, keep);
      r.rows_copied += n - keep;
      held[size_t(fs)] = held[size_t(ps)];
      next[j].session = fs;
    }
    r.reorder_ms += ms_since(t0);

    // One batched decode step: every beam's newest token on its own session.
    t0 = Clock::now();
    beams = std::move(next);
    batch.clear();
    batch_tokens.clear();
    for (const Beam& b : beams) {
      batch.push_back(sessions[size_t(b.session)].get());
      batch_tokens.push_back(b.tokens.back());
      held[size_t(b.session)].push_back(b.tokens.back());
    }
    logits.resize(beams.size() * size_t(vocab));
    engine.decode_batch(batch, batch_tokens, logits.data());
    r.decode_ms += ms_since(t0);
  }
  r.hypotheses = std::move(done);
  return r;
}

BeamReply beam_reply(const Model& m, const BeamHypothesis& h, std::span<const int32_t> stops) {
  BeamReply r{h.tokens, {}, false};
  if (!r.tokens.empty() && std::find(stops.begin(), stops.end(), r.tokens.back()) != stops.end()) {
    r.tokens.pop_back();
    r.stopped = true;
  }
  std::vector<int32_t> shown;
  for (int32_t t : r.tokens)
    if (t < m.tokenizer().vocab_size()) shown.push_back(t);
  r.text = text::decode(m.tokenizer(), shown);
  return r;
}

}  // namespace edgevl
