#include "compiler/quant_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/kernels.h"
#include "compiler/calibration.h"
#include "compiler/compile.h"
#include "compiler/quant_overrides.h"
#include "compiler/quant_preset.h"
#include "core/error.h"
#include "core/kv_layout.h"
#include "core/mapped_file.h"
#include "core/temp_dir.h"
#include "runtime/chat/conversation.h"
#include "runtime/chat/prompt.h"
#include "runtime/execution/model.h"
#include "runtime/execution/session.h"
#include "vision/image.h"
#include "vision/preprocess.h"

namespace edgevl::compiler {

namespace {

std::vector<double> log_softmax(const float* x, int64_t n) {
  double m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, double(x[i]));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(double(x[i]) - m);
  const double ls = std::log(s);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - m - ls;
  return out;
}

uint64_t weight_bytes(const Model& m) {
  uint64_t b = 0;
  for (const TensorEntry& e : m.file().tensors()) b += e.bytes;
  return b;
}

uint64_t kv_bytes(const Model& m) {
  const LlmConfig& c = m.config();
  const KvLayout kv{m.runtime_config().kv_type, c.n_kv_heads, c.head_dim,
                    m.runtime_config().context};
  return 2ull * uint64_t(m.kv_layers()) * kv.cache_bytes();
}

const char* storage_name(const TensorEntry& e) {
  switch (e.dtype) {
    case DType::Q8: return "q8";
    case DType::Q4: return "q4";
    default: return dtype_name(e.dtype).data();
  }
}

// Greedy continuation of BOS (or of "Hello" for tokenizers without one) by the float model:
// an evaluation text when the user gave none.
std::vector<int32_t> self_generated(const Model& m, int n, int threads) {
  std::vector<int32_t> ids = encode_raw(m, "", true);
  if (ids.empty()) ids = encode_raw(m, "Hello", true);
  Session s(m, SessionOptions{threads, 0});
  auto logits = s.eval_tokens(ids);
  while (int(ids.size()) < n && int64_t(ids.size()) < s.context()) {
    const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ids.push_back(next);
    logits = s.eval_tokens(std::span<const int32_t>(&ids.back(), 1));
  }
  return ids;
}

// One tile through both vision towers, then an image prompt through both models.
VisionReport compare_vision(const Model& ref, const Model& q, const std::vector<CalibSample>& s,
                            int threads, const std::string& q_backend) {
  VisionReport r;
  const VisionConfig& v = *ref.vision();
  vision::Tiles tile;
  for (const CalibSample& c : s)
    if (!c.image.empty()) {
      vision::PreprocessConfig pc = preprocess_config(v, 1);
      pc.use_thumbnail = false;
      tile = vision::preprocess(vision::decode_image_file(c.image), pc);
      r.source = c.image.string();
      break;
    }
  if (tile.count == 0) {
    // A smooth colour gradient in the normalised range (no calibration image given).
    const int n = v.image_size;
    tile.count = 1;
    tile.pixels.resize(size_t(3) * size_t(n) * size_t(n));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x)
          tile.pixels[(size_t(c) * n + y) * n + x] =
              float(std::sin(0.02 * (x + 1) * (c + 1)) * std::cos(0.017 * (y + 1)) * 1.5);
    r.source = "synthetic gradient tile";
  }
  for (const TensorEntry& e : q.file().tensors())
    if (e.name.find(".fc2.weight") != std::string::npos && e.name.rfind("vision", 0) == 0) {
      r.storage = std::string(storage_name(e)) + (e.act8 ? "a8" : "");
      break;
    }
  Session sr(ref, SessionOptions{threads, 0}), sq(q, SessionOptions{threads, 0, q_backend});
  const size_t rows = size_t(v.tokens_per_tile()) * size_t(v.llm_hidden);
  std::vector<float> er(rows), eq(rows);
  sr.engine().encode_tile(tile.pixels.data(), er.data());
  sq.engine().encode_tile(tile.pixels.data(), eq.data());
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < rows; ++i)
    ab += double(er[i]) * eq[i], aa += double(er[i]) * er[i], bb += double(eq[i]) * eq[i];
  r.cosine = ab / std::sqrt(aa * bb);
  // Next-token distributions after an image prompt: of the f32 model, and of the quantized
  // LLM fed the f32 tower's features (so that the tower's own share of the error shows).
  VisionEncoder vr(sr.engine()), vq(sq.engine());
  const Prompt pr =
      build_chat_prompt(ref, {{"user", "Describe the image.", {vr.prepare_tiles(tile)}}});
  const Prompt pq =
      build_chat_prompt(q, {{"user", "Describe the image.", {vq.prepare_tiles(tile)}}});
  const auto logits = [](Session& s, const std::vector<float>& rows) {
    s.reset();
    const auto l = s.eval_embeddings(rows.data(), int64_t(rows.size()) / s.model().config().hidden);
    return std::vector<float>(l.begin(), l.end());
  };
  std::vector<float> rows_q = prompt_embeddings(sq.engine(), &vq, pq);
  const std::vector<float> lr = logits(sr, prompt_embeddings(sr.engine(), &vr, pr)),
                           lq = logits(sq, rows_q);
  const size_t hidden = size_t(v.llm_hidden);
  for (const auto& run : pq.images)
    std::copy(er.begin(), er.end(), rows_q.begin() + run.first * int64_t(hidden));
  const std::vector<float> lq_f32_tower = logits(sq, rows_q);
  const auto kl = [](const std::vector<float>& p_logits, const std::vector<float>& q_logits) {
    const auto pl = log_softmax(p_logits.data(), int64_t(p_logits.size()));
    const auto ql = log_softmax(q_logits.data(), int64_t(q_logits.size()));
    double d = 0;
    for (size_t i = 0; i < pl.size(); ++i) d += std::exp(pl[i]) * (pl[i] - ql[i]);
    return d;
  };
  const auto top1 = [](const std::vector<float>& l) {
    return std::max_element(l.begin(), l.end()) - l.begin();
  };
  r.kl = kl(lr, lq);
  r.top1_same = top1(lr) == top1(lq);
  r.kl_tower = kl(lq_f32_tower, lq);
  r.top1_same_tower = top1(lq_f32_tower) == top1(lq);
  r.present = true;
  return r;
}

}  // namespace

// The HTP build's error value by value: every value the HTP graphs hand back (their outputs)
// against the float model's same value on the CPU, teacher-forced over `seqs`, in the same
// pass as the end-to-end agreement (*agreement). Errors carry in from earlier layers, so the
// table shows where they grow (the seeds' layer-wise debugging). In graph order of first
// appearance.
std::vector<LayerReport> htp_boundary_errors(const Model& ref, const Model& q,
                                             const std::string& target, const std::string& type,
                                             const std::vector<std::vector<int32_t>>& seqs,
                                             int threads, Agreement* agreement) {
  // graph.value -> rows of the current sequence, in the order the runs produced them
  using Rows = std::map<std::string, std::vector<float>>;
  Rows got_ref, got_htp;
  std::vector<std::string> order;
  const auto recorder = [](Rows& rows, std::vector<std::string>* seen) {
    return [&rows, seen](const std::string& g, const std::string& v, const float* x, int64_t r,
                         int64_t c) {
      auto [it, fresh] = rows.try_emplace(g + "." + v);
      if (fresh && seen && std::find(seen->begin(), seen->end(), it->first) == seen->end())
        seen->push_back(it->first);
      it->second.insert(it->second.end(), x, x + r * c);
    };
  };
  std::map<std::string, std::pair<double, double>> err;  // value -> (sum err^2, sum ref^2)
  CompareHooks hooks;
  // The CPU engine dumps every op's value; the HTP engine its graphs' outputs and the ops it
  // left on the CPU (both kinds are compared: the CPU ops' inputs came from the HTP).
  hooks.attach = [&](Session& a, Session& b) {
    a.engine().set_dump(recorder(got_ref, nullptr));
    b.engine().set_dump(recorder(got_htp, &order));
  };
  hooks.after_sequence = [&] {
    for (const auto& [name, h] : got_htp) {
      const auto it = got_ref.find(name);
      if (it == got_ref.end() || it->second.size() != h.size()) continue;
      auto& [e2, r2] = err[name];
      for (size_t i = 0; i < h.size(); ++i) {
        const double d = double(h[i]) - it->second[i];
        e2 += d * d, r2 += double(it->second[i]) * it->second[i];
      }
    }
    got_ref.clear(), got_htp.clear();
  };
  *agreement = compare_models(ref, q, seqs, threads, target, hooks);
  std::vector<LayerReport> out;
  for (const std::string& name : order) {
    const auto it = err.find(name);
    if (it == err.end()) continue;
    const auto [e2, r2] = it->second;
    const double rel = r2 > 0 ? std::sqrt(e2 / r2) : 0;
    out.push_back({name, type, e2 > 0 ? 10 * std::log10(r2 / e2) : 999.0, rel});
  }
  return out;
}

Agreement compare_models(const Model& ref, const Model& q,
                         const std::vector<std::vector<int32_t>>& seqs, int threads,
                         const std::string& q_backend, const CompareHooks& hooks) {
  Session a(ref, SessionOptions{threads, 0}), b(q, SessionOptions{threads, 0, q_backend});
  a.set_all_logits(true);
  b.set_all_logits(true);
  if (hooks.attach) hooks.attach(a, b);
  const int64_t V = ref.config().vocab_size;
  Agreement r;
  int64_t agree = 0, scored = 0;
  for (const auto& ids : seqs) {
    if (ids.empty()) continue;
    a.reset();
    b.reset();
    a.eval_tokens(ids);
    b.eval_tokens(ids);
    for (size_t p = 0; p < ids.size(); ++p) {
      const float* la = a.all_logits().data() + p * size_t(V);
      const float* lb = b.all_logits().data() + p * size_t(V);
      agree += std::max_element(la, la + V) - la == std::max_element(lb, lb + V) - lb;
      const auto pa = log_softmax(la, V), pb = log_softmax(lb, V);
      double kl = 0;
      for (int64_t i = 0; i < V; ++i)
        kl += std::exp(pa[size_t(i)]) * (pa[size_t(i)] - pb[size_t(i)]);
      r.mean_kl += kl;
      ++r.positions;
      if (p + 1 < ids.size()) {
        r.nll_float -= pa[size_t(ids[p + 1])];
        r.nll -= pb[size_t(ids[p + 1])];
        ++scored;
      }
    }
    if (hooks.after_sequence) hooks.after_sequence();
  }
  a.engine().set_dump(nullptr);
  b.engine().set_dump(nullptr);
  check(r.positions > 0, "nothing to evaluate: no tokens");
  r.top1 = double(agree) / double(r.positions);
  r.mean_kl /= double(r.positions);
  if (scored) r.nll /= double(scored), r.nll_float /= double(scored);
  return r;
}

QuantReport quant_report(const QuantReportOptions& o) {
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  const bool htp = !o.target.empty();
  if (htp) {
    check(o.quant == "w8a16" || o.quant == "w4a16" || o.quant == "f16",
          "quant-report --target {}: --quant w8a16, w4a16 (the HTP's quantized builds) or f16",
          o.target);
    check(o.write_overrides.empty(), "--write-overrides protects CPU layers; not with --target");
    check(o.quant == "f16" || !o.calib.empty(),
          "quant-report --target {} with a quantized build needs --calib (the activation encodings "
          "come "
          "from its samples)",
          o.target);
  } else {
    parse_quant_preset(o.quant, o.group, o.zero_point, o.vision_quant);  // fail before compiling
  }
  TempDir tmp;
  CompileOptions base;
  base.input = o.input;
  base.threads = o.threads;
  base.calib_rows = o.calib_rows;

  CompileOptions fo = base;
  fo.output = tmp.path() / "float.evb";
  fo.quant = "f32";
  log("compiling the f32 reference");
  compile_model(fo);
  const Model ref(fo.output);

  // Evaluation sequences.
  QuantReport rep;
  std::vector<std::vector<int32_t>> seqs;
  std::vector<CalibSample> samples;
  if (!o.calib.empty()) samples = read_calib_jsonl(o.calib);
  const int64_t window = std::min<int64_t>(ref.runtime_config().context, 512);
  if (!o.text.empty()) {
    check(std::filesystem::is_regular_file(o.text), "--text {}: no such file", o.text.string());
    std::vector<int32_t> ids = encode_raw(ref, read_text_file(o.text), true);
    check(ids.size() >= 2, "--text {}: fewer than 2 tokens", o.text.string());
    if (int64_t(ids.size()) > o.max_tokens) ids.resize(size_t(o.max_tokens));
    for (size_t i = 0; i < ids.size(); i += size_t(window))
      seqs.emplace_back(ids.begin() + i, ids.begin() + std::min(ids.size(), i + size_t(window)));
    rep.eval_source = fmt::format("{} ({} tokens)", o.text.string(), ids.size());
    rep.has_perplexity = true;
  } else if (!samples.empty()) {
    seqs = text_sequences(ref, samples, window);
    int64_t n = 0;
    for (const auto& q : seqs) n += int64_t(q.size());
    check(!seqs.empty(), "--calib {}: no text-only sample to evaluate on; give --text",
          o.calib.string());
    rep.eval_source = fmt::format("calibration texts ({} tokens)", n);
  } else {
    seqs.push_back(self_generated(ref, int(std::min<int64_t>(128, window)), o.threads));
    rep.eval_source =
        fmt::format("{} tokens generated greedily by the f32 model", seqs.back().size());
  }
  log("evaluating on " + rep.eval_source);

  log("recording float activations");
  const ActivationMap acts = samples.empty()
                                 ? collect_activations(ref, seqs, o.threads, o.calib_rows, log)
                                 : collect_activations(ref, samples, o.threads, o.calib_rows, log);

  CompileOptions qo = base;
  qo.output = tmp.path() / "quant.evb";
  qo.quant = o.quant;
  qo.group = o.group;
  qo.zero_point = o.zero_point;
  qo.vision_quant = o.vision_quant;
  qo.kv = o.kv;
  qo.overrides = o.overrides;
  qo.htp_target = o.target;
  qo.htp_split_layers = true;  // every layer's output leaves the HTP, to be compared
  qo.log = o.log;
  if (!o.calib.empty()) {
    qo.calib = o.calib;
    qo.calib_reference = &ref;
    qo.calib_activations = &acts;
  }
  log(fmt::format("compiling {}{}", o.quant, o.calib.empty() ? "" : " with calibration"));
  const CompileSummary qs = compile_model(qo);
  rep.calibrated = qs.calibrated;
  rep.calibration = qs.calibration;
  rep.quant = o.quant;
  rep.target = o.target;
  const std::string backend = htp ? o.target : "cpu";

  {
    const Model q(qo.output);
    rep.kv_type = std::string(dtype_name(q.runtime_config().kv_type));
    rep.weight_bytes = weight_bytes(q);
    rep.weight_bytes_float = weight_bytes(ref);
    rep.kv_bytes = kv_bytes(q);
    rep.kv_bytes_float = kv_bytes(ref);

    log("measuring per-layer error");
    cpu::ThreadPool pool(o.threads > 0 ? o.threads : cpu::default_thread_count());
    for (const TensorEntry& e : q.file().tensors()) {
      if (e.dtype != DType::Q8 && e.dtype != DType::Q4) continue;
      auto a = acts.find(e.name);
      if (a == acts.end() || a->second->n_rows() == 0) continue;  // e.g. embedding lookups
      const TensorTransform* t = nullptr;
      if (qs.transforms) {
        auto it = qs.transforms->find(e.name);
        if (it != qs.transforms->end()) t = &it->second;
      }
      const auto* w = static_cast<const float*>(ref.weight_data(e.name));
      const LayerError le = layer_error(pool, *a->second, w, e, t);
      std::string type = storage_name(e);
      if (e.dtype == DType::Q4) type += "g" + std::to_string(e.group) + (e.zero_point ? "z" : "");
      type += e.act8 ? "a8" : "a16";
      rep.layers.push_back({e.name, type, le.sqnr_db, le.rel_l2});
    }
    std::sort(rep.layers.begin(), rep.layers.end(),
              [](const LayerReport& a, const LayerReport& b) { return a.sqnr_db < b.sqnr_db; });
    if (htp) {
      log(fmt::format("measuring the error at the {} graphs' boundaries and end to end", o.target));
      rep.layers = htp_boundary_errors(ref, q, o.target,
                                       o.quant == "f16"     ? "fp16"
                                       : o.quant == "w4a16" ? "a16w4"
                                                            : "a16w8",
                                       seqs, o.threads, &rep.agreement);
      rep.layers_in_order = true;
    } else {
      log("comparing next-token distributions");
      rep.agreement = compare_models(ref, q, seqs, o.threads);
    }
    if (ref.vision()) {
      log("comparing the vision towers on one image");
      rep.vision = compare_vision(ref, q, samples, o.threads, backend);
    }
  }
  rep.target_met = rep.agreement.mean_kl <= o.target_kl;

  if (!o.write_overrides.empty()) {
    // Protect the worst layers, doubling their number, until the KL target is met.
    nlohmann::json user = nlohmann::json::object();
    if (!o.overrides.empty()) user = nlohmann::json::parse(read_text_file(o.overrides));
    rep.agreement_protected = rep.agreement;
    std::vector<std::pair<std::string, std::string>> prot;
    for (size_t k = 1; !rep.target_met && !rep.layers.empty(); k *= 2) {
      k = std::min(k, rep.layers.size());
      prot.clear();
      for (size_t i = 0; i < k; ++i) {
        const LayerReport& l = rep.layers[i];
        prot.emplace_back(l.name, l.type.rfind("q4", 0) == 0 ? "q8" : "f16");
      }
      nlohmann::json file = user;
      for (const auto& [name, type] : prot)
        file["tensor_quantization_overrides"][name] = {{"type", type}};
      const auto path = tmp.path() / "protect.json";
      std::ofstream(path) << file.dump(2) << "\n";
      CompileOptions po = qo;
      po.output = tmp.path() / "protected.evb";
      po.overrides = path;
      po.transforms = qs.transforms;
      po.calib.clear();  // reuse what calibration chose; do not run it again
      po.calib_reference = nullptr;
      po.calib_activations = nullptr;
      po.log = nullptr;
      compile_model(po);
      const Model pm(po.output);
      rep.agreement_protected = compare_models(ref, pm, seqs, o.threads);
      rep.protected_layers = prot;
      rep.target_met = rep.agreement_protected.mean_kl <= o.target_kl;
      log(fmt::format("protecting the worst {} layer(s): mean KL {:.5f}, top-1 {:.4f}", k,
                      rep.agreement_protected.mean_kl, rep.agreement_protected.top1));
      if (k == rep.layers.size()) break;
    }
    nlohmann::json file = user;
    if (!file.contains("tensor_quantization_overrides"))
      file["tensor_quantization_overrides"] = nlohmann::json::object();
    for (const auto& [name, type] : rep.protected_layers)
      file["tensor_quantization_overrides"][name] = {{"type", type}};
    std::ofstream out(o.write_overrides);
    check(bool(out), "--write-overrides {}: cannot write", o.write_overrides.string());
    out << file.dump(2) << "\n";
    check(bool(out), "--write-overrides {}: write failed", o.write_overrides.string());
  }
  return rep;
}

}  // namespace edgevl::compiler
