#include "compiler/calibration.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"
#include "compiler/gptq.h"
#include "compiler/quant_preset.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "runtime/chat/conversation.h"
#include "runtime/chat/prompt.h"
#include "runtime/execution/linear.h"
#include "runtime/execution/model.h"
#include "runtime/execution/session.h"
#include "vision/image.h"

namespace edgevl::compiler {

std::vector<CalibSample> read_calib_jsonl(const std::filesystem::path& path) {
  check(std::filesystem::is_regular_file(path), "--calib {}: no such file", path.string());
  std::istringstream in(read_text_file(path));
  std::vector<CalibSample> out;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("{}:{}: not a JSON object: {}", path.string(), no, e.what());
    }
    check(j.is_object() && j.contains("text") && j["text"].is_string(),
          "{}:{}: expected {{\"text\": \"...\", \"image\": \"optional path\"}}", path.string(), no);
    CalibSample s;
    s.text = j["text"].get<std::string>();
    if (j.contains("image")) {
      check(j["image"].is_string(), "{}:{}: \"image\" must be a path string", path.string(), no);
      s.image = j["image"].get<std::string>();
      if (s.image.is_relative()) s.image = path.parent_path() / s.image;
      check(std::filesystem::is_regular_file(s.image), "{}:{}: image {} not found", path.string(),
            no, s.image.string());
    }
    out.push_back(std::move(s));
  }
  check(!out.empty(), "--calib {}: no samples", path.string());
  return out;
}

std::vector<std::vector<int32_t>> text_sequences(const Model& m,
                                                 const std::vector<CalibSample>& samples,
                                                 int64_t max_tokens) {
  std::vector<std::vector<int32_t>> seqs;
  for (const auto& s : samples) {
    if (!s.image.empty()) continue;  // teacher forcing is over text
    auto ids = encode_raw(m, s.text, true);
    if (int64_t(ids.size()) > max_tokens) ids.resize(size_t(max_tokens));
    if (!ids.empty()) seqs.push_back(std::move(ids));
  }
  return seqs;
}

namespace {

// Records matmul inputs through the session's per-op callback.
class Recorder {
 public:
  Recorder(const Model& m, int64_t max_rows) : max_rows_(max_rows) {
    for (const Graph& g : m.graphs())
      for (const Op& op : g.ops) {
        if (op.type != OpType::MatMul) continue;
        const std::string key = input_key(g.name, g.values[op.inputs[0]].name);
        const std::string& w = m.weight(g.values[op.inputs[1]].weight).name;
        auto& s = by_value_[key];
        if (!s) s = std::make_shared<ActivationStats>();
        acts_[w] = s;
      }
  }
  void on_value(const std::string& graph, const std::string& value, const float* x, int64_t rows,
                int64_t cols) {
    auto it = by_value_.find(input_key(graph, value));
    if (it == by_value_.end()) return;
    ActivationStats& s = *it->second;
    if (s.K == 0) {
      s.K = cols;
      s.absmax.assign(size_t(cols), 0.f);
      s.sumabs.assign(size_t(cols), 0.0);
      s.sumsq.assign(size_t(cols), 0.0);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x + r * cols;
      for (int64_t j = 0; j < cols; ++j) {
        const float a = std::fabs(row[j]);
        s.absmax[size_t(j)] = std::max(s.absmax[size_t(j)], a);
        s.sumabs[size_t(j)] += a;
        s.sumsq[size_t(j)] += double(a) * a;
      }
      // Reservoir sampling keeps a uniform sample of max_rows rows of the whole run.
      const int64_t seen = s.rows_seen++;
      if (s.n_rows() < max_rows_) {
        s.rows.insert(s.rows.end(), row, row + cols);
      } else {
        const int64_t slot = std::uniform_int_distribution<int64_t>(0, seen)(rng_);
        if (slot < max_rows_) std::copy(row, row + cols, s.rows.begin() + slot * cols);
      }
    }
  }
  ActivationMap take() { return std::move(acts_); }

 private:
  // The LLM's prefill and decode graphs name their values alike: one record serves both.
  static std::string input_key(const std::string& graph, const std::string& value) {
    return (graph == "vision" ? "vision:" : "llm:") + value;
  }
  int64_t max_rows_;
  std::mt19937_64 rng_{12345};
  std::map<std::string, std::shared_ptr<ActivationStats>> by_value_;
  ActivationMap acts_;
};

std::vector<int32_t> fit_context(std::vector<int32_t> ids, const Session& s, const LogFn& log,
                                 size_t i) {
  if (int64_t(ids.size()) > s.context()) {
    if (log)
      log(fmt::format("calibration: sample {} truncated to the context ({} tokens)", i + 1,
                      s.context()));
    ids.resize(size_t(s.context()));
  }
  return ids;
}

}  // namespace

ActivationMap collect_activations(const Model& m, const std::vector<CalibSample>& samples,
                                  int threads, int64_t max_rows, const LogFn& log) {
  Recorder rec(m, max_rows);
  Session s(m, SessionOptions{threads, 0});
  s.engine().set_dump([&](const std::string& g, const std::string& v, const float* x, int64_t rows,
                          int64_t cols) { rec.on_value(g, v, x, rows, cols); });
  int64_t tokens = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const CalibSample& c = samples[i];
    s.reset();
    if (c.image.empty()) {
      const auto ids = fit_context(encode_raw(m, c.text, true), s, log, i);
      if (ids.empty()) continue;
      s.eval_tokens(ids);
      tokens += int64_t(ids.size());
    } else {
      check(m.vision() != nullptr, "calibration sample {} has an image but {} {}", i + 1,
            m.file().path(),
            VisionEncoder::takes_images(m)
                ? "takes images through a Qwen-VL tower, which calibration does not run yet"
                : "is text-only");
      VisionEncoder enc(s.engine());
      const Prompt p = build_chat_prompt(m, {{"user", c.text, {enc.prepare_file(c.image)}}});
      check_fits_context(s, int64_t(p.ids.size()), 0, m.file().path());
      const std::vector<float> rows = prompt_embeddings(s.engine(), &enc, p);
      s.eval_embeddings(rows.data(), int64_t(p.ids.size()));
      tokens += int64_t(p.ids.size());
    }
    if (log)
      log(fmt::format("calibration: sample {}/{} ({} tokens so far)", i + 1, samples.size(),
                      tokens));
  }
  return rec.take();
}

ActivationMap collect_activations(const Model& m, const std::vector<std::vector<int32_t>>& seqs,
                                  int threads, int64_t max_rows, const LogFn& log) {
  Recorder rec(m, max_rows);
  Session s(m, SessionOptions{threads, 0});
  s.engine().set_dump([&](const std::string& g, const std::string& v, const float* x, int64_t rows,
                          int64_t cols) { rec.on_value(g, v, x, rows, cols); });
  for (size_t i = 0; i < seqs.size(); ++i) {
    s.reset();
    const auto ids = fit_context(seqs[i], s, log, i);
    if (!ids.empty()) s.eval_tokens(ids);
  }
  return rec.take();
}

// ------------------------------------------------------------------ transforms

void apply_transform(const TensorTransform& t, const TensorEntry& e, float* w) {
  const int64_t N = e.shape[0], K = e.shape.size() == 2 ? e.shape[1] : 1;
  if (!t.replacement.empty() && e.dtype == DType::Q4 && !e.zero_point && t.replacement.n == N &&
      t.replacement.k == K) {
    t.replacement.values(w);
    if (!t.row_scale.empty())
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) w[n * K + k] *= t.row_scale[size_t(n)];
    return;
  }
  if (!t.col_scale.empty()) {
    check(int64_t(t.col_scale.size()) == K, "internal: column scale size of '{}'", e.name);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) w[n * K + k] *= t.col_scale[size_t(k)];
  }
  if (!t.row_scale.empty()) {
    check(int64_t(t.row_scale.size()) == N, "internal: row scale size of '{}'", e.name);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) w[n * K + k] *= t.row_scale[size_t(n)];
  }
  // Clip ratios were chosen for one Q4 grid; a tensor later stored otherwise (an override
  // protecting it at Q8, say) keeps only the exact rescale.
  const int64_t G = e.group, ng = G ? (K + G - 1) / G : 0;
  if (!t.clip.empty() && e.dtype == DType::Q4 && int64_t(t.clip.size()) == N * ng) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t g = 0; g < ng; ++g) {
        const float c = t.clip[size_t(n * ng + g)];
        if (c >= 1.f) continue;
        float* p = w + n * K + g * G;
        const int64_t len = std::min(G, K - g * G);
        float lo = 0, hi = 0;
        for (int64_t i = 0; i < len; ++i) lo = std::min(lo, p[i]), hi = std::max(hi, p[i]);
        if (!e.zero_point) hi = std::max(hi, -lo), lo = -hi;
        for (int64_t i = 0; i < len; ++i) p[i] = std::clamp(p[i], c * lo, c * hi);
      }
  }
}

namespace {

constexpr int64_t kClipRows = 64;

// Squared output error and reference energy of one projection on the recorded rows, with
// the candidate transform applied to the weights and 1/col_scale to the rows.
struct ErrSum {
  double err = 0, ref = 0;
};

// `ref` (M x N, x times the float weights) is computed when empty.
ErrSum projection_error(cpu::ThreadPool& pool, const ActivationStats& x, const float* w,
                        const TensorEntry& e, const TensorTransform* t, std::vector<float>& ref) {
  const int64_t N = e.shape[0], K = e.shape[1], M = x.n_rows();
  if (ref.empty()) {
    ref.resize(size_t(M * N));
    cpu::matmul(pool, x.rows.data(), M, K, w, DType::F32, N, nullptr, ref.data());
  }
  std::vector<float> got(size_t(M * N));
  std::vector<float> wt(w, w + N * K);
  std::vector<float> xs(x.rows);
  if (t) {
    apply_transform(*t, e, wt.data());
    if (!t->col_scale.empty())
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k) xs[size_t(m * K + k)] /= t->col_scale[size_t(k)];
  }
  std::vector<uint8_t> packed(e.expected_bytes() + 64);
  store_tensor(wt.data(), e, packed.data());
  run_linear(pool, xs.data(), M, e, packed.data(), nullptr, got.data(), /*portable=*/true);
  // A row scale divides output channel n on purpose (it is undone by the next layer's column
  // scale); compare against the float output scaled the same way.
  const bool rows = t && !t->row_scale.empty();
  ErrSum s;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = rows ? double(ref[i]) * t->row_scale[i % size_t(N)] : double(ref[i]);
    const double d = double(got[i]) - r;
    s.err += d * d;
    s.ref += r * r;
  }
  return s;
}

double to_db(const ErrSum& s) {
  if (s.err <= 0) return 200.0;  // exact: report a large finite SQNR
  return 10.0 * std::log10(std::max(s.ref, 1e-300) / s.err);
}

bool is_quantized(const TensorEntry& e) {
  return e.dtype == DType::Q8 || e.dtype == DType::Q4;
}

// The Q4 group scale as stored: rounded to f16 (quant.h).
float q4_stored_scale(float s) {
  return f16_to_f32(f32_to_f16(s));
}

// The group p[0, len) dequantized under e's Q4 rule (quant.h), into out.
void q4_roundtrip(const float* p, int64_t len, bool zero_point, float* out) {
  if (!zero_point) {
    const float s = f16_to_f32(cpu::q4_symmetric_scale(p, len));
    for (int64_t i = 0; i < len; ++i)
      out[i] = s != 0.f ? s * std::clamp(std::round(p[i] / s), -8.f, 7.f) : 0.f;
    return;
  }
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < len; ++i) lo = std::min(lo, p[i]), hi = std::max(hi, p[i]);
  const float s = q4_stored_scale((hi - lo) / 15.f);
  const float z = s != 0.f ? std::round(-lo / s) : 0.f;
  for (int64_t i = 0; i < len; ++i)
    out[i] = s != 0.f ? s * (std::clamp(std::round(p[i] / s) + z, 0.f, 15.f) - z) : 0.f;
}

// Per (row, group) clip ratio minimising the group's share of the output error on the first
// `R` recorded rows xs ([R][K], already divided by the column scale):
// sum_m (sum_{j in g} xs[m][j] * (q(w_j) - w_j))^2, as AWQ's clip search does.
std::vector<float> search_clip(cpu::ThreadPool& pool, const float* w, const TensorEntry& e,
                               const float* xs, int64_t R) {
  static constexpr float kRatios[] = {1.f, 0.95f, 0.9f, 0.85f, 0.8f, 0.75f, 0.7f};
  const int64_t N = e.shape[0], K = e.shape[1], G = e.group, ng = (K + G - 1) / G;
  std::vector<float> clip(size_t(N * ng), 1.f);
  pool.parallel_for(N, [&](int64_t n) {
    float d[128], v[128];  // G <= 128
    for (int64_t g = 0; g < ng; ++g) {
      const float* p = w + n * K + g * G;
      const int64_t len = std::min(G, K - g * G);
      float lo = 0, hi = 0;
      for (int64_t i = 0; i < len; ++i) lo = std::min(lo, p[i]), hi = std::max(hi, p[i]);
      if (!e.zero_point) hi = std::max(hi, -lo), lo = -hi;
      double best = -1;
      for (float c : kRatios) {
        for (int64_t i = 0; i < len; ++i) v[i] = std::clamp(p[i], c * lo, c * hi);
        q4_roundtrip(v, len, e.zero_point, d);
        for (int64_t i = 0; i < len; ++i) d[i] -= p[i];
        double err = 0;
        for (int64_t m = 0; m < R; ++m) {
          const float* x = xs + m * K + g * G;
          // Eight partial sums: a shape the compiler vectorises (a single running sum is a
          // serial dependency chain, and this loop is most of the clip search's time).
          float acc[8] = {};
          int64_t i = 0;
          for (; i + 8 <= len; i += 8)
            for (int j = 0; j < 8; ++j) acc[j] += x[i + j] * d[i + j];
          for (; i < len; ++i) acc[0] += x[i] * d[i];
          const float a =
              ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
          err += double(a) * a;
        }
        if (best < 0 || err < best) best = err, clip[size_t(n * ng + g)] = c;
      }
    }
  });
  const bool any = std::any_of(clip.begin(), clip.end(), [](float c) { return c < 1.f; });
  if (!any) clip.clear();
  return clip;
}

}  // namespace

LayerError layer_error(cpu::ThreadPool& pool, const ActivationStats& x, const float* w,
                       const TensorEntry& e, const TensorTransform* t) {
  std::vector<float> ref;
  const ErrSum s = projection_error(pool, x, w, e, t, ref);
  return {to_db(s), s.ref > 0 ? std::sqrt(s.err / s.ref) : 0.0};
}

namespace {

// Projections that read one value, and what produced that value (where 1/s is folded).
struct Group {
  std::vector<std::string> consumers;
  std::vector<std::string> producer_1d;  // norm weight and bias: v[i] /= s[i]
  std::string producer_rows;             // a matrix whose output rows are divided by s
};

// From the compiled graphs: inputs of matmuls produced by RmsNorm / LayerNorm (fold into the
// norm's weight and bias) or by SiluMul (fold into the rows of the matmul making its `up`).
std::vector<Group> find_groups(const Model& m) {
  std::vector<Group> out;
  for (const char* name : {"prefill", "vision"}) {
    const Graph* g = m.find_graph(name);
    if (!g) continue;
    auto wname = [&](int32_t v) { return m.weight(g->values[size_t(v)].weight).name; };
    std::map<int32_t, const Op*> producer;
    for (const Op& op : g->ops) producer[op.output] = &op;
    std::map<int32_t, Group> by_input;
    std::vector<int32_t> order;
    for (const Op& op : g->ops) {
      if (op.type != OpType::MatMul) continue;
      const int32_t in = op.inputs[0];
      auto p = producer.find(in);
      if (p == producer.end()) continue;
      const Op& src = *p->second;
      Group& grp = by_input[in];
      if (grp.consumers.empty()) {
        order.push_back(in);
        if (src.type == OpType::RmsNorm || src.type == OpType::LayerNorm) {
          for (size_t i = 1; i < src.inputs.size(); ++i)
            grp.producer_1d.push_back(wname(src.inputs[i]));
        } else if (src.type == OpType::SiluMul) {
          auto up = producer.find(src.inputs[1]);
          if (up != producer.end() && up->second->type == OpType::MatMul) {
            grp.producer_rows = wname(up->second->inputs[1]);
            if (up->second->bias() >= 0) grp.producer_1d.push_back(wname(up->second->bias()));
          }
        }
      }
      grp.consumers.push_back(wname(op.inputs[1]));
    }
    for (int32_t v : order) {
      Group& grp = by_input[v];
      if (!grp.producer_1d.empty() || !grp.producer_rows.empty()) out.push_back(std::move(grp));
    }
  }
  return out;
}

}  // namespace

Transforms calibrate(cpu::ThreadPool& pool, const Model& float_model,
                     const std::map<std::string, TensorEntry>& entries, const ActivationMap& acts,
                     const LogFn& log, CalibrationSummary* summary) {
  auto produce = [&](const std::string& name) {
    const TensorEntry& e = float_model.weight(name);
    check(e.dtype == DType::F32, "internal: calibration needs the f32 model ('{}' is {})", name,
          dtype_name(e.dtype));
    const auto* p = static_cast<const float*>(float_model.weight_data(name));
    return std::vector<float>(p, p + e.numel());
  };
  const std::vector<Group> groups = find_groups(float_model);

  Transforms out;
  CalibrationSummary sum;
  double gain_total = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& g = groups[gi];
    bool any_q = false;
    for (const auto& c : g.consumers) any_q |= is_quantized(entries.at(c));
    auto it = acts.find(g.consumers[0]);
    if (!any_q || it == acts.end() || it->second->n_rows() == 0) continue;
    const ActivationStats& x = *it->second;
    std::vector<std::vector<float>> w;
    for (const auto& c : g.consumers) w.push_back(produce(c));
    const int64_t K = x.K;
    std::vector<float> wmax(size_t(K), 0.f);
    for (size_t i = 0; i < w.size(); ++i) {
      const int64_t N = entries.at(g.consumers[i]).shape[0];
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          wmax[size_t(k)] = std::max(wmax[size_t(k)], std::fabs(w[i][size_t(n * K + k)]));
    }

    // Candidate scales (empty = identity).
    std::vector<std::vector<float>> cands{{}};
    auto normalise = [&](std::vector<float> s) {
      // Geometric-mean normalisation keeps scales around 1 (numerically tidy, same product).
      double lg = 0;
      for (float& v : s) v = std::max(v, 1e-5f), lg += std::log(double(v));
      const float gm = float(std::exp(lg / double(s.size())));
      for (float& v : s) v /= gm;
      return s;
    };
    for (float a : {0.25f, 0.5f, 0.75f}) {
      std::vector<float> s(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k)
        s[size_t(k)] = std::pow(std::max(x.absmax[size_t(k)], 1e-5f), a) /
                       std::pow(std::max(wmax[size_t(k)], 1e-5f), 1.f - a);
      cands.push_back(normalise(std::move(s)));
    }
    for (int i = 1; i <= 8; ++i) {
      const float a = float(i) / 8.f;
      std::vector<float> s(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k)
        s[size_t(k)] = std::pow(float(x.sumabs[size_t(k)] / double(x.rows_seen)) + 1e-6f, a);
      cands.push_back(normalise(std::move(s)));
    }

    std::vector<std::vector<float>> refs(w.size());
    // Error of the whole group under scale s; with_clip also searches Q4 clip ratios (returned).
    auto group_error = [&](const std::vector<float>& s, bool with_clip,
                           std::vector<std::vector<float>>* clips) {
      ErrSum total;
      for (size_t i = 0; i < w.size(); ++i) {
        const TensorEntry& e = entries.at(g.consumers[i]);
        TensorTransform t;
        t.col_scale = s;
        // A rotated tensor is stored as W H (quant_preset.cpp): clip ratios found on W would
        // clamp the wrong values, so it keeps the rescale alone.
        if (with_clip && e.dtype == DType::Q4 && !e.rotation) {
          std::vector<float> ws = w[i];
          apply_transform(t, e, ws.data());
          // The clip search is O(N K R): a subsample of the recorded rows is enough.
          const int64_t R = std::min<int64_t>(x.n_rows(), kClipRows);
          std::vector<float> xs(x.rows.begin(), x.rows.begin() + R * K);
          if (!s.empty())
            for (int64_t m = 0; m < R; ++m)
              for (int64_t k = 0; k < K; ++k) xs[size_t(m * K + k)] /= s[size_t(k)];
          t.clip = search_clip(pool, ws.data(), e, xs.data(), R);
        }
        if (clips) clips->push_back(t.clip);
        const ErrSum es = projection_error(pool, x, w[i].data(), e, &t, refs[i]);
        total.err += es.err;
        total.ref += es.ref;
      }
      return total;
    };
    const ErrSum base = group_error({}, false, nullptr);
    size_t best = 0;
    ErrSum best_err = base;
    for (size_t c = 1; c < cands.size(); ++c) {
      const ErrSum e = group_error(cands[c], false, nullptr);
      if (e.err < best_err.err) best = c, best_err = e;
    }
    const std::vector<float>& s = cands[best];
    // Clip search on top of the chosen scale; kept only if it lowers the measured error.
    bool clipped = false, has_q4 = false;
    for (const auto& c : g.consumers) has_q4 |= entries.at(c).dtype == DType::Q4;
    if (has_q4) {
      std::vector<std::vector<float>> clips;
      const ErrSum e = group_error(s, true, &clips);
      if (e.err < best_err.err) {
        best_err = e;
        clipped = true;
        for (size_t i = 0; i < clips.size(); ++i)
          if (!clips[i].empty()) {
            out[g.consumers[i]].clip = std::move(clips[i]);
            ++sum.clipped_tensors;
          }
      }
    }
    // GPTQ on top of the chosen scale, for the symmetric Q4 consumers (the others keep their
    // clip ratios); kept only if it lowers the group's error on the recorded rows.
    bool compensated = false;
    if (has_q4) {
      ErrSum total;
      std::vector<GptqGrid> reps(g.consumers.size());
      for (size_t i = 0; i < g.consumers.size(); ++i) {
        const TensorEntry& e = entries.at(g.consumers[i]);
        TensorTransform t;
        t.col_scale = s;
        if (auto c = out.find(g.consumers[i]); c != out.end()) t.clip = c->second.clip;
        if (e.dtype == DType::Q4 && !e.zero_point) {
          std::vector<float> ws = w[i];
          TensorTransform scale_only;
          scale_only.col_scale = s;
          apply_transform(scale_only, e, ws.data());
          std::vector<float> xs(x.rows);
          if (!s.empty())
            for (int64_t m = 0; m < x.n_rows(); ++m)
              for (int64_t k = 0; k < K; ++k) xs[size_t(m * K + k)] /= s[size_t(k)];
          reps[i] = gptq_q4(pool, ws.data(), e, xs.data(), x.n_rows());
          t.replacement = reps[i];
        }
        const ErrSum es = projection_error(pool, x, w[i].data(), e, &t, refs[i]);
        total.err += es.err;
        total.ref += es.ref;
      }
      if (total.err < best_err.err) {
        best_err = total;
        compensated = true;
        for (size_t i = 0; i < reps.size(); ++i)
          if (!reps[i].empty()) {
            TensorTransform& t = out[g.consumers[i]];
            if (!t.clip.empty()) --sum.clipped_tensors;
            t.clip.clear();
            t.replacement = std::move(reps[i]);
            ++sum.gptq_tensors;
          }
      }
    }
    if (!s.empty()) {
      ++sum.scaled;
      std::vector<float> inv(s.size());
      for (size_t k = 0; k < s.size(); ++k) inv[k] = 1.f / s[k];
      for (const auto& p : g.producer_1d) out[p].row_scale = inv;
      if (!g.producer_rows.empty()) out[g.producer_rows].row_scale = inv;
      for (const auto& c : g.consumers) out[c].col_scale = s;
    }
    ++sum.groups;
    const double gain = to_db(best_err) - to_db(base);
    gain_total += gain;
    if (log)
      log(fmt::format("calibration: {}/{} {}: {:.2f} -> {:.2f} dB ({}{}{})", gi + 1, groups.size(),
                      g.consumers[0], to_db(base), to_db(best_err),
                      best == 0   ? "no rescale"
                      : best <= 3 ? "smooth"
                                  : "awq-scale",
                      clipped ? " + clip" : "", compensated ? " + gptq" : ""));
  }
  sum.mean_gain_db = sum.groups ? gain_total / sum.groups : 0;
  if (summary) *summary = sum;
  return out;
}

}  // namespace edgevl::compiler
