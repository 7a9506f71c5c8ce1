#include "runtime/session.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"
#include "core/error.h"
#include "core/kv_layout.h"

namespace edgevl {

namespace {

uint8_t* aligned_bytes(size_t n) {
  n = (n + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, std::max<size_t>(n, 64));
  check(p != nullptr, "out of memory allocating {} bytes", n);
  std::memset(p, 0, n);
  return static_cast<uint8_t*>(p);
}

}  // namespace

Session::Session(const Model& model, SessionOptions opts) : model_(model) {
  const LlmConfig& c = model.config();
  const RuntimeConfig& rt = model.runtime_config();
  context_ = rt.context;
  if (opts.context > 0) {
    check(opts.context <= rt.context,
          "requested context {} exceeds the {} tokens compiled into {}; recompile with "
          "--context {}",
          opts.context, rt.context, model.file().path(), opts.context);
    context_ = opts.context;
  }
  pool_ = std::make_unique<cpu::ThreadPool>(opts.threads > 0 ? opts.threads
                                                             : cpu::default_thread_count());
  for (const Graph& g : model.graphs())
    arena_bytes_ = std::max(arena_bytes_, size_t(g.arena_bytes));
  arena_.reset(aligned_bytes(arena_bytes_));

  size_t scratch_floats = 0;
  for (const Graph& g : model.graphs()) {
    auto b = std::make_unique<GraphRunner>(model, g, arena_.get());
    if (g.name == "prefill") prefill_ = b.get();
    if (g.name == "decode") decode_ = b.get();
    if (g.name == "head") head_ = b.get();
    if (g.name == "vision") vision_ = b.get();
    scratch_floats = std::max(scratch_floats, b->scratch_floats());
    bound_.push_back(std::move(b));
  }
  // Every user writes its part before reading it (executor.cpp), so no zero fill.
  scratch_.reset(new float[std::max<size_t>(scratch_floats, 1)]);
  check(prefill_ && head_, "{}: needs 'prefill' and 'head' graphs", model.file().path());

  const size_t per_cache = KvLayout{rt.kv_type, c.n_kv_heads, c.head_dim, context_}.cache_bytes();
  kv_block_.reset(aligned_bytes(per_cache * 2 * size_t(c.n_layers)));
  for (int l = 0; l < c.n_layers; ++l) {
    k_cache_.push_back(kv_block_.get() + per_cache * (2 * size_t(l)));
    v_cache_.push_back(kv_block_.get() + per_cache * (2 * size_t(l) + 1));
  }
  embed_rows_.resize(size_t(prefill_->graph().width) * size_t(c.hidden));
  positions_.resize(size_t(prefill_->graph().width));
  kv_.k = &k_cache_;
  kv_.v = &v_cache_;
  kv_.type = rt.kv_type;
  kv_.capacity = context_;
  logits_.resize(size_t(c.vocab_size));
  hidden_row_.resize(size_t(c.hidden));
  hidden_rows_.resize(embed_rows_.size());
}

Session::~Session() = default;

int Session::threads() const {
  return pool_->size();
}

void Session::embed(std::span<const int32_t> ids, float* out) const {
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

std::span<const float> Session::eval_tokens(std::span<const int32_t> ids) {
  check(!ids.empty(), "nothing to evaluate: empty token list");
  const int64_t width = prefill_->graph().width;
  // Embed chunk by chunk through the session's row buffer (sized for one prefill chunk).
  std::span<const float> out;
  const bool keep_all = all_logits_on_;
  std::vector<float> collected;
  for (size_t start = 0; start < ids.size(); start += size_t(width)) {
    const size_t n = std::min(ids.size() - start, size_t(width));
    embed(ids.subspan(start, n), embed_rows_.data());
    out = eval_embeddings(embed_rows_.data(), int64_t(n));
    if (keep_all) collected.insert(collected.end(), all_logits_.begin(), all_logits_.end());
  }
  if (keep_all) all_logits_ = std::move(collected);
  return out;
}

std::span<const float> Session::eval_embeddings(const float* rows, int64_t n) {
  const LlmConfig& c = model_.config();
  check(n > 0, "nothing to evaluate: no rows");
  check(n_past_ + n <= context_,
        "context full: {} tokens already in the context + {} new = {} exceeds the context of {} "
        "tokens",
        n_past_, n, n_past_ + n, context_);
  const int64_t d = c.hidden;
  if (all_logits_on_) all_logits_.assign(size_t(n) * size_t(c.vocab_size), 0.f);
  const GraphRunner& g = (n == 1 && decode_) ? *decode_ : *prefill_;
  const int64_t width = g.graph().width;
  std::vector<float>& hidden = hidden_row_;
  for (int64_t start = 0; start < n; start += width) {
    const int32_t cnt = int32_t(std::min(n - start, width));
    std::memcpy(g.input(), rows + start * d, size_t(cnt) * size_t(d) * 4);
    for (int32_t i = 0; i < cnt; ++i) positions_[size_t(i)] = n_past_ + i;
    g.run(*pool_, cnt, positions_.data(), &kv_, scratch_.get(), dump_, profiler_);
    const float* out = g.output();
    if (all_logits_on_) {
      // The head graph shares the arena, so take the rows out before running it.
      std::memcpy(hidden_rows_.data(), out, size_t(cnt) * size_t(d) * 4);
      for (int32_t i = 0; i < cnt; ++i)
        run_head(hidden_rows_.data() + size_t(i) * size_t(d),
                 all_logits_.data() + size_t(start + i) * size_t(c.vocab_size));
    }
    if (start + cnt == n)
      std::memcpy(hidden.data(), out + size_t(cnt - 1) * size_t(d), size_t(d) * 4);
    n_past_ += cnt;
  }
  run_head(hidden.data(), logits_.data());
  return logits_;
}

void Session::encode_tile(const float* pixels, float* out) {
  const VisionConfig* v = model_.vision();
  check(v != nullptr && vision_ != nullptr, "{}: not a vision-language model",
        model_.file().path());
  // im2col: row 0 stays zero (the class-token slot), then one row per patch, row-major over
  // the grid, each flattened channel-major like the conv weight [c][ky][kx].
  const int64_t ps = v->patch_size, size = v->image_size, grid = v->grid();
  const int64_t row = 3 * ps * ps;
  float* in = vision_->input();
  std::fill(in, in + row, 0.f);
  for (int64_t py = 0; py < grid; ++py)
    for (int64_t px = 0; px < grid; ++px) {
      float* dst = in + (1 + py * grid + px) * row;
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t ky = 0; ky < ps; ++ky) {
          const float* src = pixels + (c * size + py * ps + ky) * size + px * ps;
          std::copy(src, src + ps, dst + (c * ps + ky) * ps);
        }
    }
  vision_->run(*pool_, vision_->graph().width, nullptr, nullptr, scratch_.get(), dump_, profiler_);
  std::memcpy(out, vision_->output(),
              size_t(v->tokens_per_tile()) * size_t(model_.config().hidden) * sizeof(float));
}

void Session::run_head(const float* hidden_row, float* logits) {
  const GraphRunner& h = *head_;
  std::memcpy(h.input(), hidden_row, size_t(model_.config().hidden) * 4);
  const int32_t pos = 0;
  h.run(*pool_, 1, &pos, nullptr, nullptr, dump_, profiler_);
  std::memcpy(logits, h.output(), size_t(model_.config().vocab_size) * 4);
}

}  // namespace edgevl
