// Engine's steps over sessions (runtime/execution/engine.h): batched decode of several
// sequences and speculative verification of one, each row on its own session's KV cache. Kept
// apart from engine.cpp so that the engine itself needs no Session (which is built on it).
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "runtime/execution/engine.h"
#include "runtime/execution/session.h"

namespace edgevl {

void Engine::decode_batch(std::span<Session* const> seqs, std::span<const int32_t> tokens,
                          float* logits) {
  check(tokens.size() == seqs.size(), "decode_batch: {} tokens for {} sequences", tokens.size(),
        seqs.size());
  const size_t width = size_t(max_batch());
  // Embedded max_batch() at a time through the engine's row buffer; the checks of the whole
  // batch come first, so that a refused step changes no session.
  check_batch(seqs);
  const int32_t vocab = model_.config().vocab_size;
  for (size_t i = 0; i < tokens.size(); ++i)
    check(tokens[i] >= 0 && tokens[i] < vocab,
          "decode_batch: token id {} of sequence {} is outside the vocabulary (0..{})", tokens[i],
          i, vocab - 1);
  for (size_t start = 0; start < seqs.size(); start += width) {
    const size_t n = std::min(width, seqs.size() - start);
    embed(tokens.subspan(start, n), batch_rows_.data());
    decode_batch_embeddings(seqs.subspan(start, n), batch_rows_.data(),
                            logits + start * size_t(vocab));
  }
}

void Engine::check_batch(std::span<Session* const> seqs) const {
  check(!seqs.empty(), "decode_batch: no sequences");
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Session* s = seqs[i];
    check(s != nullptr, "decode_batch: sequence {} is null", i);
    check(&s->engine_ == this, "decode_batch: sequence {} belongs to another engine", i);
    for (size_t j = 0; j < i; ++j)
      check(seqs[j] != s, "decode_batch: sequences {} and {} are the same session", j, i);
    check(s->n_past_ + 1 <= s->context_,
          "context full: sequence {} has {} tokens in its context of {} tokens; no room for the "
          "next one",
          i, s->n_past_, s->context_);
  }
}

void Engine::decode_batch_embeddings(std::span<Session* const> seqs, const float* rows,
                                     float* logits) {
  check_batch(seqs);
  const size_t d = size_t(model_.config().hidden), vocab = size_t(model_.config().vocab_size);
  const size_t width = size_t(max_batch());
  for (size_t start = 0; start < seqs.size(); start += width) {
    const size_t n = std::min(width, seqs.size() - start);
    const float* in = rows + start * d;
    float* out = logits + start * vocab;
    if (n == 1) {  // the plain decode step: decode and head graphs of width 1
      Session& s = *seqs[start];
      head(forward(s.kv_, s.n_past_, in, 1, nullptr, {.rope_delta = s.rope_delta()}), out);
      s.n_past_ += 1;
      continue;
    }
    const GraphRunner& g = *decode_batch_;
    std::memcpy(g.input(), in, n * d * 4);
    for (size_t i = 0; i < n; ++i) {
      positions_[i] = seqs[start + i]->n_past_;
      batch_kv_[i] = &seqs[start + i]->kv_;
      for (size_t a = 0; a < 3; ++a)
        rope_thw_[3 * i + a] = positions_[i] + seqs[start + i]->rope_delta();
    }
    g.run_rows(*pool_, int32_t(n), positions_.data(), batch_kv_.data(), dump_, profiler_, nullptr,
               rope_thw_.data());
    // The head graph shares the arena: the hidden rows are taken out before it runs.
    std::memcpy(batch_hidden_.data(), g.output(), n * d * 4);
    const GraphRunner& h = *head_batch_;
    std::memcpy(h.input(), batch_hidden_.data(), n * d * 4);
    h.run_rows(*pool_, int32_t(n), positions_.data(), nullptr, dump_, profiler_, out);
    for (size_t i = 0; i < n; ++i) seqs[start + i]->n_past_ += 1;
  }
}

void Engine::verify(Session& s, std::span<const int32_t> ids, float* logits, VerifyPath path) {
  check(&s.engine_ == this, "verify: the session belongs to another engine");
  check(!ids.empty(), "verify: no tokens");
  const int64_t n = int64_t(ids.size());
  if (int64_t(s.n_past_) + n > s.context_)
    throw ContextFullError(fmt::format(
        "context full: {} tokens already in the context + {} to verify = {} exceeds the context "
        "of {} tokens",
        s.n_past_, n, s.n_past_ + n, s.context_));
  const size_t d = size_t(model_.config().hidden), vocab = size_t(model_.config().vocab_size);
  const size_t width = size_t(max_batch());
  // Greedy speculation is exact only if every row's logits are a decode step's: the batch
  // graphs give that at any row count (several passes past the width); the prefill graph rounds
  // differently and flips near-ties (stories260k w8a8, 17 rows on the NEON levels). It stays
  // the path of binaries without batch graphs, where Batch would be one pass per row.
  if (path == VerifyPath::Auto) path = decode_batch_ ? VerifyPath::Batch : VerifyPath::Prefill;
  if (path == VerifyPath::Batch) {
    for (size_t start = 0; start < ids.size(); start += width) {
      const size_t cnt = std::min(width, ids.size() - start);
      embed(ids.subspan(start, cnt), batch_rows_.data());
      float* out = logits + start * vocab;
      if (cnt == 1 || !decode_batch_) {  // width-1 graphs, row by row
        for (size_t i = 0; i < cnt; ++i) {
          head(forward(s.kv_, s.n_past_, batch_rows_.data() + i * d, 1, nullptr,
                       {.rope_delta = s.rope_delta()}),
               out + i * vocab);
          s.n_past_ += 1;
        }
        continue;
      }
      const GraphRunner& g = *decode_batch_;
      std::memcpy(g.input(), batch_rows_.data(), cnt * d * 4);
      for (size_t i = 0; i < cnt; ++i) {
        positions_[i] = s.n_past_ + int32_t(i);
        batch_kv_[i] = &s.kv_;
        for (size_t a = 0; a < 3; ++a) rope_thw_[3 * i + a] = positions_[i] + s.rope_delta();
      }
      g.run_rows(*pool_, int32_t(cnt), positions_.data(), batch_kv_.data(), dump_, profiler_,
                 nullptr, rope_thw_.data());
      std::memcpy(batch_hidden_.data(), g.output(), cnt * d * 4);
      const GraphRunner& h = *head_batch_;
      std::memcpy(h.input(), batch_hidden_.data(), cnt * d * 4);
      h.run_rows(*pool_, int32_t(cnt), positions_.data(), nullptr, dump_, profiler_, out);
      s.n_past_ += int32_t(cnt);
    }
    return;
  }
  if (verify_rows_.size() < size_t(n) * d) {
    verify_rows_.resize(size_t(n) * d);
    verify_hidden_.resize(size_t(n) * d);
  }
  embed(ids, verify_rows_.data());
  forward(s.kv_, s.n_past_, verify_rows_.data(), n, verify_hidden_.data(),
          {.rope_delta = s.rope_delta()});
  s.n_past_ += int32_t(n);
  if (!head_batch_) {
    for (int64_t i = 0; i < n; ++i)
      head(verify_hidden_.data() + size_t(i) * d, logits + size_t(i) * vocab);
    return;
  }
  const GraphRunner& h = *head_batch_;
  for (size_t start = 0; start < size_t(n); start += width) {
    const size_t cnt = std::min(width, size_t(n) - start);
    std::memcpy(h.input(), verify_hidden_.data() + start * d, cnt * d * 4);
    h.run(*pool_, int32_t(cnt), positions_.data(), nullptr, dump_, profiler_,
          logits + start * vocab);
  }
}

}  // namespace edgevl
