#include "runtime/engine.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/cpu/layout_ops.h"
#include "backend/cpu/quant.h"
#include "core/error.h"
#include "runtime/session.h"

namespace edgevl {

uint8_t* aligned_zeroed_bytes(size_t n) {
  n = (n + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, std::max<size_t>(n, 64));
  check(p != nullptr, "out of memory allocating {} bytes", n);
  std::memset(p, 0, n);
  return static_cast<uint8_t*>(p);
}

Engine::Engine(const Model& model, EngineOptions opts) : model_(model) {
  pool_ = std::make_unique<cpu::ThreadPool>(opts.threads > 0 ? opts.threads
                                                             : cpu::default_thread_count());
  size_t arena_bytes = 0;
  for (const Graph& g : model.graphs()) arena_bytes = std::max(arena_bytes, size_t(g.arena_bytes));
  arena_.reset(aligned_zeroed_bytes(arena_bytes));

  size_t scratch_floats = 0;
  for (const Graph& g : model.graphs()) {
    auto b = std::make_unique<GraphRunner>(model, g, arena_.get());
    if (g.name == "prefill") prefill_ = b.get();
    if (g.name == "decode") decode_ = b.get();
    if (g.name == "head") head_ = b.get();
    if (g.name == "vision") vision_ = b.get();
    if (g.name == "decode_batch") decode_batch_ = b.get();
    if (g.name == "head_batch") head_batch_ = b.get();
    scratch_floats = std::max(scratch_floats, b->scratch_floats());
    bound_.push_back(std::move(b));
  }
  // Every user writes its part before reading it (executor.cpp), so no zero fill.
  scratch_.reset(new float[std::max<size_t>(scratch_floats, 1)]);
  check(prefill_ && head_, "{}: needs 'prefill' and 'head' graphs", model.file().path());
  const int64_t d = model.config().hidden;
  if (decode_batch_ || head_batch_) {
    check(decode_batch_ && head_batch_ &&
              decode_batch_->graph().width == head_batch_->graph().width && decode_ != nullptr,
          "{}: the batched decode graphs do not match (corrupted file?)", model.file().path());
    const int32_t width = decode_batch_->graph().width;
    const auto cols = [](const GraphRunner* r, int32_t id) {
      return r->graph().values[size_t(id)].shape.back();
    };
    check(cols(decode_batch_, decode_batch_->graph().output) == d &&
              cols(decode_batch_, decode_batch_->graph().input) == d &&
              cols(head_batch_, head_batch_->graph().input) == d &&
              cols(head_batch_, head_batch_->graph().output) == model.config().vocab_size,
          "{}: the batched decode graphs do not match the model config (corrupted file?)",
          model.file().path());
    batch_hidden_.resize(size_t(width) * size_t(d));
  }
  batch_rows_.resize(size_t(max_batch()) * size_t(d));
  batch_kv_.resize(size_t(max_batch()));
  positions_.resize(size_t(std::max(prefill_->graph().width, max_batch())));
  hidden_row_.resize(size_t(d));
}

Engine::~Engine() = default;

int Engine::threads() const {
  return pool_->size();
}

int32_t Engine::chunk() const {
  return prefill_->graph().width;
}

int32_t Engine::max_batch() const {
  return decode_batch_ ? decode_batch_->graph().width : 1;
}

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
      head(forward(s.kv_, s.n_past_, in, 1), out);
      s.n_past_ += 1;
      continue;
    }
    const GraphRunner& g = *decode_batch_;
    std::memcpy(g.input(), in, n * d * 4);
    for (size_t i = 0; i < n; ++i) {
      positions_[i] = seqs[start + i]->n_past_;
      batch_kv_[i] = &seqs[start + i]->kv_;
    }
    g.run_rows(*pool_, int32_t(n), positions_.data(), batch_kv_.data(), scratch_.get(), dump_,
               profiler_);
    // The head graph shares the arena: the hidden rows are taken out before it runs.
    std::memcpy(batch_hidden_.data(), g.output(), n * d * 4);
    const GraphRunner& h = *head_batch_;
    std::memcpy(h.input(), batch_hidden_.data(), n * d * 4);
    h.run_rows(*pool_, int32_t(n), positions_.data(), nullptr, nullptr, dump_, profiler_, out);
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
          head(forward(s.kv_, s.n_past_, batch_rows_.data() + i * d, 1), out + i * vocab);
          s.n_past_ += 1;
        }
        continue;
      }
      const GraphRunner& g = *decode_batch_;
      std::memcpy(g.input(), batch_rows_.data(), cnt * d * 4);
      for (size_t i = 0; i < cnt; ++i) {
        positions_[i] = s.n_past_ + int32_t(i);
        batch_kv_[i] = &s.kv_;
      }
      g.run_rows(*pool_, int32_t(cnt), positions_.data(), batch_kv_.data(), scratch_.get(), dump_,
                 profiler_);
      std::memcpy(batch_hidden_.data(), g.output(), cnt * d * 4);
      const GraphRunner& h = *head_batch_;
      std::memcpy(h.input(), batch_hidden_.data(), cnt * d * 4);
      h.run_rows(*pool_, int32_t(cnt), positions_.data(), nullptr, nullptr, dump_, profiler_, out);
      s.n_past_ += int32_t(cnt);
    }
    return;
  }
  if (verify_rows_.size() < size_t(n) * d) {
    verify_rows_.resize(size_t(n) * d);
    verify_hidden_.resize(size_t(n) * d);
  }
  embed(ids, verify_rows_.data());
  forward(s.kv_, s.n_past_, verify_rows_.data(), n, verify_hidden_.data());
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
    h.run(*pool_, int32_t(cnt), positions_.data(), nullptr, nullptr, dump_, profiler_,
          logits + start * vocab);
  }
}

void Engine::embed(std::span<const int32_t> ids, float* out) const {
  const LlmConfig& c = model_.config();
  const int32_t table = model_.runtime_config().embedding_tensor;
  const TensorEntry& e = model_.weight(table);
  const auto* base = static_cast<const uint8_t*>(model_.weight_data(table));
  for (size_t i = 0; i < ids.size(); ++i)
    check(ids[i] >= 0 && ids[i] < c.vocab_size, "token id {} is outside the vocabulary (0..{})",
          ids[i], c.vocab_size - 1);
  const int64_t n = int64_t(ids.size());
  switch (e.dtype) {
    case DType::Q8: cpu::q8_unpack_rows(base, c.vocab_size, c.hidden, ids.data(), n, out); return;
    case DType::Q4:
      cpu::q4_unpack_rows(base, c.vocab_size, c.hidden, e.group, e.zero_point, ids.data(), n, out);
      return;
    default: break;
  }
  const size_t row_bytes = size_t(c.hidden) * dtype_size(e.dtype);
  for (size_t i = 0; i < ids.size(); ++i)
    cpu::convert_to_f32(base + size_t(ids[i]) * row_bytes, e.dtype, out + i * size_t(c.hidden),
                        c.hidden);
}

const float* Engine::forward(const KvCaches& kv, int32_t n_past, const float* rows, int64_t n,
                             float* all_hidden) {
  const int64_t d = model_.config().hidden;
  const GraphRunner& g = (n == 1 && decode_) ? *decode_ : *prefill_;
  const int64_t width = g.graph().width;
  for (int64_t start = 0; start < n; start += width) {
    const int32_t cnt = int32_t(std::min(n - start, width));
    std::memcpy(g.input(), rows + start * d, size_t(cnt) * size_t(d) * 4);
    for (int32_t i = 0; i < cnt; ++i) positions_[size_t(i)] = n_past + int32_t(start) + i;
    g.run(*pool_, cnt, positions_.data(), &kv, scratch_.get(), dump_, profiler_);
    const float* out = g.output();
    // The head graph shares the arena, so the rows are taken out before it runs.
    if (all_hidden) std::memcpy(all_hidden + start * d, out, size_t(cnt) * size_t(d) * 4);
    if (start + cnt == n)
      std::memcpy(hidden_row_.data(), out + size_t(cnt - 1) * size_t(d), size_t(d) * 4);
  }
  return hidden_row_.data();
}

void Engine::head(const float* hidden_row, float* logits) {
  const GraphRunner& h = *head_;
  std::memcpy(h.input(), hidden_row, size_t(model_.config().hidden) * 4);
  const int32_t pos = 0;
  h.run(*pool_, 1, &pos, nullptr, nullptr, dump_, profiler_, logits);
}

void Engine::encode_tile(const float* pixels, float* out) {
  const VisionConfig* v = model_.vision();
  check(v != nullptr && vision_ != nullptr, "{}: not a vision-language model",
        model_.file().path());
  const int64_t size = v->image_size;
  float* in = vision_->input();
  if (vision_->graph().values[size_t(vision_->graph().input)].shape[0] == 3)
    std::copy(pixels, pixels + 3 * size * size, in);  // the graph's PatchIm2col takes it
  else
    cpu::patch_im2col(pixels, size, v->patch_size, in);  // binaries from before that op
  vision_->run(*pool_, vision_->graph().width, nullptr, nullptr, scratch_.get(), dump_, profiler_);
  std::memcpy(out, vision_->output(),
              size_t(v->tokens_per_tile()) * size_t(model_.config().hidden) * sizeof(float));
}

}  // namespace edgevl
