#include "runtime/execution/session.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/kv_layout.h"

namespace edgevl {

Session::Session(const Model& model, SessionOptions opts)
    : owned_(std::make_unique<Engine>(model, EngineOptions{opts.threads, opts.backend})),
      engine_(*owned_) {
  init(opts);
}

Session::Session(Engine& engine, SessionOptions opts) : engine_(engine) {
  init(opts);
}

void Session::init(SessionOptions opts) {
  const Model& model = engine_.model();
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
  // Per layer, what the graphs' ops address by it: a KV cache where an Attention op runs (every
  // layer of most models; the full-attention layers of a hybrid like Qwen3.5), the recurrent
  // state where CausalConv1d / GatedDeltaRule run, sized from the ops themselves (every graph
  // of a model reads the same).
  const size_t L = size_t(c.n_layers);
  std::vector<uint8_t> attends(L, 0);
  std::vector<size_t> conv(L, 0), delta(L, 0);
  for (const Graph& g : model.graphs())
    for (const Op& op : g.ops) {
      if (op.layer < 0 || op.layer >= c.n_layers) continue;
      const size_t l = size_t(op.layer);
      if (op.type == OpType::Attention) attends[l] = 1;
      if (op.type == OpType::CausalConv1d)
        conv[l] = size_t(op.conv().taps - 1) * size_t(g.values[size_t(op.output)].shape.back());
      if (op.type == OpType::GatedDeltaRule) {
        const DeltaRuleAttrs d = op.delta_rule();
        delta[l] = size_t(d.hv) * size_t(d.dk) * size_t(d.dv);
      }
    }
  const size_t per_cache = KvLayout{rt.kv_type, c.n_kv_heads, c.head_dim, context_}.cache_bytes();
  size_t n_caches = 0;
  for (uint8_t a : attends) n_caches += a;
  kv_block_.reset(aligned_zeroed_bytes(std::max<size_t>(1, per_cache * 2 * n_caches)));
  uint8_t* at = kv_block_.get();
  for (size_t l = 0; l < L; ++l) {
    k_cache_.push_back(attends[l] ? at : nullptr);
    v_cache_.push_back(attends[l] ? at + per_cache : nullptr);
    at += attends[l] ? 2 * per_cache : 0;
  }
  kv_.k = &k_cache_;
  kv_.v = &v_cache_;
  kv_.type = rt.kv_type;
  kv_.capacity = context_;
  size_t total = 0;
  for (size_t l = 0; l < L; ++l) total += conv[l] + delta[l];
  if (total > 0) {
    state_floats_.assign(total, 0.f);
    float* p = state_floats_.data();
    for (size_t l = 0; l < L; ++l) {
      conv_state_.push_back(conv[l] ? p : nullptr);
      p += conv[l];
      delta_state_.push_back(delta[l] ? p : nullptr);
      p += delta[l];
    }
    kv_.conv = &conv_state_;
    kv_.delta = &delta_state_;
  }
  embed_rows_.resize(size_t(engine_.chunk()) * size_t(c.hidden));
  logits_.resize(size_t(c.vocab_size));
}

Session::~Session() = default;

void Session::reset() {
  n_past_ = 0;
  pending_mark_ = {};
  rope_shifts_.clear();
  std::fill(state_floats_.begin(), state_floats_.end(), 0.f);
}

void Session::truncate(int32_t n) {
  check(n >= 0 && n <= n_past_, "cannot truncate a context of {} tokens to {}", n_past_, n);
  if (n == n_past_) return;
  if (n == 0) return reset();
  check(!has_recurrent_state(),
        "cannot truncate a context of {} tokens to {}: {} keeps a recurrent state (linear "
        "attention layers) that cannot be rolled back to a middle position",
        n_past_, n, model().config().family);
  n_past_ = n;
  while (!rope_shifts_.empty() && rope_shifts_.back().start >= n) rope_shifts_.pop_back();
}

void Session::mark(SessionMark* m) const {
  m->n_past = n_past_;
  m->state.assign(state_floats_.begin(), state_floats_.end());
}

void Session::rewind(const SessionMark& m) {
  check(m.n_past >= 0 && m.n_past <= n_past_ && m.state.size() == state_floats_.size(),
        "rewind: the mark (position {}) is not one of this session's at or before its {} tokens",
        m.n_past, n_past_);
  n_past_ = m.n_past;
  while (!rope_shifts_.empty() && rope_shifts_.back().start >= n_past_) rope_shifts_.pop_back();
  std::copy(m.state.begin(), m.state.end(), state_floats_.begin());
}

void Session::copy_prefix_from(const Session& src, int32_t n, int32_t keep) {
  check(&src.model() == &model(), "copy_prefix_from: the sessions belong to different models");
  check(n >= 0 && n <= src.n_past_ && n <= context_,
        "copy_prefix_from: {} positions asked of a session holding {} (context {})", n, src.n_past_,
        context_);
  check(keep >= 0 && keep <= n && keep <= n_past_,
        "copy_prefix_from: keeping {} positions of {} (copying up to {})", keep, n_past_, n);
  if (&src == this) {  // the rows are already there
    if (n != n_past_) truncate(n);
    return;
  }
  check(!has_recurrent_state() || n == src.n_past_,
        "copy_prefix_from: {} keeps a recurrent state (linear attention layers): only a whole "
        "sequence ({} positions) can be copied, not its first {}",
        model().config().family, src.n_past_, n);
  std::copy(src.state_floats_.begin(), src.state_floats_.end(), state_floats_.begin());
  const LlmConfig& c = model().config();
  const DType t = model().runtime_config().kv_type;
  // Each cache is [head][capacity][head_dim] (core/kv_layout.h), so one head's rows are
  // contiguous; the capacities (contexts) of the two sessions may differ.
  const KvLayout dst_l{t, c.n_kv_heads, c.head_dim, context_};
  const KvLayout src_l{t, c.n_kv_heads, c.head_dim, src.context_};
  const size_t row = size_t(c.head_dim) * dst_l.elem_bytes();
  const size_t rows = size_t(n - keep);
  auto copy_cache = [&](uint8_t* dst, const uint8_t* from) {
    for (int64_t h = 0; h < c.n_kv_heads; ++h) {
      std::memcpy(dst + (size_t(h) * size_t(context_) + size_t(keep)) * row,
                  from + (size_t(h) * size_t(src.context_) + size_t(keep)) * row, rows * row);
      if (t == DType::Q8)  // the per (token, head) scales
        std::memcpy(dst_l.scales(dst) + size_t(h) * size_t(context_) + size_t(keep),
                    src_l.scales(from) + size_t(h) * size_t(src.context_) + size_t(keep),
                    rows * sizeof(float));
    }
  };
  if (rows > 0)
    for (size_t l = 0; l < k_cache_.size(); ++l) {
      if (!k_cache_[l]) continue;  // a layer without attention (its state is copied above)
      copy_cache(k_cache_[l], src.k_cache_[l]);
      copy_cache(v_cache_[l], src.v_cache_[l]);
    }
  rope_shifts_.clear();
  for (const RopeShift& r : src.rope_shifts_)
    if (r.start < n) rope_shifts_.push_back(r);
  n_past_ = n;
}

std::span<const float> Session::eval_tokens(std::span<const int32_t> ids) {
  check(!ids.empty(), "nothing to evaluate: empty token list");
  const size_t width = size_t(engine_.chunk());
  // Embed chunk by chunk through the session's row buffer (sized for one prefill chunk).
  std::span<const float> out;
  const bool keep_all = all_logits_on_;
  std::vector<float> collected;
  for (size_t start = 0; start < ids.size(); start += width) {
    const size_t n = std::min(ids.size() - start, width);
    engine_.embed(ids.subspan(start, n), embed_rows_.data());
    out = eval_embeddings(embed_rows_.data(), int64_t(n));
    if (keep_all) collected.insert(collected.end(), all_logits_.begin(), all_logits_.end());
  }
  if (keep_all) all_logits_ = std::move(collected);
  return out;
}

std::span<const float> Session::eval_embeddings(const float* rows, int64_t n) {
  return eval_multimodal(rows, n, nullptr, nullptr);
}

std::span<const float> Session::eval_multimodal(const float* rows, int64_t n,
                                                const int32_t* rope_thw, const float* deepstack) {
  const LlmConfig& c = model().config();
  check(n > 0, "nothing to evaluate: no rows");
  if (n_past_ + n > context_)
    throw ContextFullError(fmt::format(
        "context full: {} tokens already in the context + {} new = {} exceeds the context of {} "
        "tokens",
        n_past_, n, n_past_ + n, context_));
  const size_t d = size_t(c.hidden), vocab = size_t(c.vocab_size);
  if (all_logits_on_) {
    hidden_rows_.resize(size_t(n) * d);
    all_logits_.assign(size_t(n) * vocab, 0.f);
  }
  int32_t next_rope = 0;  // the rotary position of the row after these
  int32_t shift_at = -1;  // the first row whose positions are not the running text ones
  if (rope_thw) {
    next_rope = n_past_ + rope_delta();
    for (int64_t i = 0; i < 3 * n; ++i) {
      check(rope_thw[i] >= 0 && rope_thw[i] < context_,
            "rotary position {} outside the context of {}", rope_thw[i], context_);
      next_rope = std::max(next_rope, rope_thw[i] + 1);
      if (shift_at < 0 && rope_thw[i] != n_past_ + rope_delta() + int32_t(i / 3))
        shift_at = n_past_ + int32_t(i / 3);
    }
  }
  const float* last =
      engine_.forward(kv_, n_past_, rows, n, all_logits_on_ ? hidden_rows_.data() : nullptr,
                      {.rope_thw = rope_thw, .rope_delta = rope_delta(), .deepstack = deepstack});
  n_past_ += int32_t(n);
  if (pending_mark_.mark && n_past_ >= pending_mark_.pos) {
    if (n_past_ == pending_mark_.pos) mark(pending_mark_.mark);
    pending_mark_ = {};
  }
  // From the first image row on, later rows follow the new delta (truncate() before that row
  // returns to the old one).
  if (rope_thw && next_rope - n_past_ != rope_delta())
    rope_shifts_.push_back({shift_at, next_rope - n_past_});
  if (all_logits_on_)
    for (int64_t i = 0; i < n; ++i)
      engine_.head(hidden_rows_.data() + size_t(i) * d, all_logits_.data() + size_t(i) * vocab);
  engine_.head(last, logits_.data());
  return logits_;
}

}  // namespace edgevl
