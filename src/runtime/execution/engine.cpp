#include "runtime/execution/engine.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/hadamard.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/layout_ops.h"
#include "backend/cpu/quant.h"
#include "core/error.h"
#include "format/qwen_vision_config.h"
#include "runtime/execution/htp_delegate.h"

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

  if (opts.backend != "cpu") {
    check(opts.backend == "htp" || opts.backend.rfind("htp-", 0) == 0,
          "unknown backend '{}' (cpu; htp: the target the model was compiled for; htp-v73, "
          "htp-v75, htp-v79, htp-v81)",
          opts.backend);
    HtpOptions ho;
    ho.target = opts.backend;
    htp_ = std::make_unique<HtpBackend>(model, ho);
  }
  for (const Graph& g : model.graphs()) {
    auto b = std::make_unique<GraphRunner>(model, g, arena_.get());
    if (htp_) b->set_delegate(htp_->delegate_for(g));
    if (g.name == "prefill") prefill_ = b.get();
    if (g.name == "decode") decode_ = b.get();
    if (g.name == "head") head_ = b.get();
    if (g.name == "vision") vision_ = b.get();
    if (g.name == "qwen_vision") qwen_vision_ = b.get();
    if (g.name == "decode_batch") decode_batch_ = b.get();
    if (g.name == "head_batch") head_batch_ = b.get();
    bound_.push_back(std::move(b));
  }
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
  rope_thw_.resize(3 * positions_.size());
  hidden_row_.resize(size_t(d));
  // Values the runtime writes besides the input (models/qwen3_vl.cpp): zeros unless given.
  for (int32_t id;
       (id = prefill_->graph().find("deepstack." + std::to_string(deepstack_.size()))) >= 0;) {
    check(prefill_->graph().values[size_t(id)].shape ==
              std::vector<int64_t>{prefill_->graph().width, d},
          "{}: misshapen DeepStack input (corrupted file?)", model.file().path());
    deepstack_.push_back(prefill_->value(id));
  }
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
    case DType::Q8: cpu::q8_unpack_rows(base, c.vocab_size, c.hidden, ids.data(), n, out); break;
    case DType::Q4:
      cpu::q4_unpack_rows(base, c.vocab_size, c.hidden, e.group, e.zero_point, ids.data(), n, out);
      break;
    default: break;
  }
  if (e.dtype == DType::Q8 || e.dtype == DType::Q4) {
    // A table shared with a rotated LM head holds E H; H is its own inverse.
    if (e.rotation) cpu::hadamard_rows(out, n, c.hidden, e.rotation);
    return;
  }
  const size_t row_bytes = size_t(c.hidden) * dtype_size(e.dtype);
  for (size_t i = 0; i < ids.size(); ++i)
    cpu::convert_to_f32(base + size_t(ids[i]) * row_bytes, e.dtype, out + i * size_t(c.hidden),
                        c.hidden);
}

const float* Engine::forward(const KvCaches& kv, int32_t n_past, const float* rows, int64_t n,
                             float* all_hidden, const MultimodalRows& mm) {
  const int64_t d = model_.config().hidden;
  check(!mm.deepstack || !deepstack_.empty(), "{}: DeepStack features for a model without them",
        model_.file().path());
  // DeepStack features go in through the prefill graph's inputs, even for one row.
  const bool one = n == 1 && decode_ && !mm.deepstack;
  const GraphRunner& g = one ? *decode_ : *prefill_;
  const int64_t width = g.graph().width;
  for (int64_t start = 0; start < n; start += width) {
    const int32_t cnt = int32_t(std::min(n - start, width));
    std::memcpy(g.input(), rows + start * d, size_t(cnt) * size_t(d) * 4);
    for (int32_t i = 0; i < cnt; ++i) positions_[size_t(i)] = n_past + int32_t(start) + i;
    if (!one)
      for (size_t k = 0; k < deepstack_.size(); ++k) {
        if (mm.deepstack)
          std::memcpy(deepstack_[k], mm.deepstack + (int64_t(k) * n + start) * d,
                      size_t(cnt) * size_t(d) * 4);
        else
          std::memset(deepstack_[k], 0, size_t(cnt) * size_t(d) * 4);
      }
    const int32_t* thw = nullptr;
    if (mm.rope_thw) {
      thw = mm.rope_thw + 3 * start;
    } else if (mm.rope_delta != 0) {
      for (int32_t i = 0; i < cnt; ++i)
        for (int a = 0; a < 3; ++a)
          rope_thw_[size_t(3 * i + a)] = positions_[size_t(i)] + mm.rope_delta;
      thw = rope_thw_.data();
    }
    g.run(*pool_, cnt, positions_.data(), &kv, dump_, profiler_, nullptr, thw);
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
  h.run(*pool_, 1, &pos, nullptr, dump_, profiler_, logits);
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
  vision_->run(*pool_, vision_->graph().width, nullptr, nullptr, dump_, profiler_);
  std::memcpy(out, vision_->output(),
              size_t(v->tokens_per_tile()) * size_t(model_.config().hidden) * sizeof(float));
}

int32_t Engine::qwen_max_patches() const {
  return qwen_vision_ ? qwen_vision_->graph().width : 0;
}

void Engine::encode_qwen_image(const float* pixels, int32_t grid_h, int32_t grid_w, float* out,
                               float* deepstack) {
  check(qwen_vision_ != nullptr, "{}: not a Qwen3-VL / Qwen3.5 model with a vision tower",
        model_.file().path());
  const QwenVisionShape s = qwen_vision_shape(model_.config());
  const GraphRunner& g = *qwen_vision_;
  const int32_t m = s.merge, n = grid_h * grid_w, width = g.graph().width;
  check(grid_h > 0 && grid_w > 0 && grid_h % m == 0 && grid_w % m == 0 && n <= width,
        "image grid {}x{} patches: must be multiples of {} and at most {} patches", grid_h, grid_w,
        m, width);
  std::memcpy(g.input(), pixels, size_t(n) * size_t(s.row_values()) * 4);
  // Per patch, in merge-block order: its (row, column), the bilinear (align_corners) blend of
  // the learned position table at it (transformers' vision_utils, float32), and its rotary
  // positions (t unused: 0).
  const int32_t pos_id = g.graph().find("vision.pos_embed");
  check(pos_id >= 0, "{}: the vision graph has no position input", model_.file().path());
  float* pos = g.value(pos_id);
  const auto* table =
      static_cast<const float*>(model_.weight_data("model.visual.pos_embed.weight"));
  const int64_t C = s.hidden, side = s.pos_side;
  rope_thw_.resize(std::max(rope_thw_.size(), size_t(3 * n)));
  struct Taps {
    int64_t i0, i1;
    float w0, w1;
  };
  auto taps = [&](int32_t index, int32_t size) {
    const float src = float(index) * float(side - 1) / float(std::max(size - 1, 1));
    const float fl = std::floor(src);
    const int64_t i0 = std::clamp<int64_t>(int64_t(fl), 0, side - 1);
    const int64_t i1 = std::clamp<int64_t>(int64_t(fl) + 1, 0, side - 1);
    const float d0 = std::fabs(src - fl), d1 = std::fabs(src - fl - 1.f);
    return Taps{i0, i1, std::max(1.f - d0, 0.f), std::max(1.f - d1, 0.f)};
  };
  int32_t i = 0;
  for (int32_t br = 0; br < grid_h / m; ++br)
    for (int32_t bc = 0; bc < grid_w / m; ++bc)
      for (int32_t ir = 0; ir < m; ++ir)
        for (int32_t ic = 0; ic < m; ++ic, ++i) {
          const int32_t r = br * m + ir, c = bc * m + ic;
          const Taps y = taps(r, grid_h), x = taps(c, grid_w);
          const int64_t idx[4] = {y.i0 * side + x.i0, y.i0 * side + x.i1, y.i1 * side + x.i0,
                                  y.i1 * side + x.i1};
          const float w[4] = {y.w0 * x.w0, y.w0 * x.w1, y.w1 * x.w0, y.w1 * x.w1};
          float* dst = pos + int64_t(i) * C;
          for (int64_t k = 0; k < C; ++k) {
            float acc = 0.f;
            for (int t = 0; t < 4; ++t) acc += table[idx[t] * C + k] * w[t];
            dst[k] = acc;
          }
          rope_thw_[size_t(3 * i)] = 0;
          rope_thw_[size_t(3 * i + 1)] = r;
          rope_thw_[size_t(3 * i + 2)] = c;
        }
  g.run(*pool_, n, nullptr, nullptr, dump_, profiler_, nullptr, rope_thw_.data());
  // The output: [width / 4][out * (1 + K)], the merger's columns then each DeepStack feature's.
  const int64_t out_cols = s.out, k_all = 1 + int64_t(s.deepstack.size()), tokens = n / (m * m);
  const float* y = g.output();
  for (int64_t t = 0; t < tokens; ++t) {
    std::memcpy(out + t * out_cols, y + t * out_cols * k_all, size_t(out_cols) * 4);
    if (deepstack)
      for (int64_t k = 1; k < k_all; ++k)
        std::memcpy(deepstack + ((k - 1) * tokens + t) * out_cols, y + (t * k_all + k) * out_cols,
                    size_t(out_cols) * 4);
  }
}

void Engine::encode_qwen_video(const float* pixels, int32_t grid_t, int32_t grid_h, int32_t grid_w,
                               float* out, float* deepstack) {
  check(qwen_vision_ != nullptr, "{}: not a Qwen3-VL / Qwen3.5 model with a vision tower",
        model_.file().path());
  const QwenVisionShape s = qwen_vision_shape(model_.config());
  check(grid_t > 0, "video with {} temporal groups", grid_t);
  const size_t patches = size_t(grid_h) * size_t(grid_w),
               tokens = patches / size_t(s.merge * s.merge), d = size_t(s.out),
               k = s.deepstack.size();
  std::vector<float> ds(deepstack ? k * tokens * d : 0);
  for (int32_t t = 0; t < grid_t; ++t) {
    encode_qwen_image(pixels + size_t(t) * patches * size_t(s.row_values()), grid_h, grid_w,
                      out + size_t(t) * tokens * d, deepstack ? ds.data() : nullptr);
    // This group's rows of each DeepStack feature, at its place among all groups' rows.
    for (size_t j = 0; j < k && deepstack; ++j)
      std::copy_n(ds.data() + j * tokens * d, tokens * d,
                  deepstack + (j * size_t(grid_t) + size_t(t)) * tokens * d);
  }
}

}  // namespace edgevl
