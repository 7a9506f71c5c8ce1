#include "compiler/htp_compile.h"

#include <algorithm>
#include <chrono>

#include "backend/qnn/htp_graph.h"
#include "backend/qnn/qnn_library.h"
#include "compiler/quant_overrides.h"
#include "core/error.h"
#include "format/evb.h"
#include "runtime/chat/prompt.h"
#include "runtime/execution/htp_delegate.h"
#include "runtime/execution/model.h"
#include "runtime/execution/session.h"
#include "runtime/execution/vision_encoder.h"

namespace edgevl::compiler {

void check_htp_options(const HtpCompileOptions& o) {
  qnn::HtpTarget::parse(o.target);
  check(o.quant == "fp16" || o.quant == "a16w8" || o.quant == "a16w4",
        "unknown HTP arithmetic '{}' (fp16, a16w8, a16w4)", o.quant);
  check(o.quant == "fp16" || !o.calib.empty(),
        "the HTP's quantized builds (--quant w8a16 / w4a16 with --target) need calibration "
        "samples (--calib FILE.jsonl, lines {{\"text\": ..., \"image\": optional path}}): its "
        "activation encodings are the ranges they reach");
  qnn::QnnLibrary::get();
}

ValueRanges collect_value_ranges(const Model& m, const std::vector<CalibSample>& samples,
                                 int threads, const LogFn& log) {
  ValueRanges ranges;
  auto record = [&](const std::string& v, const float* x, int64_t n) {
    if (n <= 0) return;
    const auto [lo, hi] = std::minmax_element(x, x + n);
    auto [it, fresh] = ranges.try_emplace(v, *lo, *hi);
    if (!fresh) it->second = {std::min(it->second.first, *lo), std::max(it->second.second, *hi)};
  };
  Session s(m, SessionOptions{threads, 0});
  s.engine().set_dump([&](const std::string&, const std::string& v, const float* x, int64_t rows,
                          int64_t cols) { record(v, x, rows * cols); });
  // The decoder graphs' input (the embedding rows) is written by the runtime, not by an op, so
  // the dump does not see it: its range is taken from the rows given to the session.
  const Graph& prefill = m.graph("prefill");
  const std::string& input = prefill.values[size_t(prefill.input)].name;
  const int64_t d = m.config().hidden;
  std::vector<float> emb;
  for (size_t i = 0; i < samples.size(); ++i) {
    const CalibSample& c = samples[i];
    s.reset();
    if (c.image.empty()) {
      std::vector<int32_t> ids = m.tokenizer().encode(c.text);
      if (m.tokenizer().add_bos() && m.tokenizer().bos_id() >= 0)
        ids.insert(ids.begin(), m.tokenizer().bos_id());
      if (int64_t(ids.size()) > s.context()) ids.resize(size_t(s.context()));
      if (ids.empty()) continue;
      emb.resize(ids.size() * size_t(d));
      s.engine().embed(ids, emb.data());
      record(input, emb.data(), int64_t(emb.size()));
      s.eval_tokens(ids);
      // One decode step, so that values only the decode graphs have get a range too.
      if (s.n_past() < s.context()) s.eval_tokens(std::vector<int32_t>{ids.back()});
    } else {
      check(m.vision() != nullptr, "calibration sample {} has an image but {} is text-only", i + 1,
            m.file().path());
      VisionEncoder enc(s.engine());
      const Prompt p = build_chat_prompt(m, {{"user", c.text, {enc.prepare_file(c.image)}}});
      const std::vector<float> rows = prompt_embeddings(s.engine(), &enc, p);
      record(input, rows.data(), int64_t(rows.size()));
      s.eval_embeddings(rows.data(), int64_t(p.ids.size()));
    }
    if (log) log(fmt::format("htp calibration: sample {}/{}", i + 1, samples.size()));
  }
  return ranges;
}

void add_htp_section(const std::filesystem::path& path, const HtpCompileOptions& o,
                     const std::function<void(const std::string&)>& log) {
  std::vector<uint8_t> payload;
  {
    const Model m(path);
    HtpOptions ho;
    ho.target = o.target;
    ho.fp16 = o.quant == "fp16";
    ho.weight_bits = o.quant == "a16w4" ? 4 : 8;
    ho.share_weights = o.share_weights;
    ho.split_layers = o.split_layers;
    if (!o.overrides.empty() && !ho.fp16) {
      const QuantOverrides ov = read_quant_overrides(o.overrides);
      ho.weight_override = [ov](const std::string& tensor) {
        int bits = 0;  // rules apply in order: the last that names the tensor decides
        for (const TensorOverride& r : ov.rules) {
          if (!override_matches(r, tensor)) continue;
          const DType t = r.keep_float ? DType::F16 : r.type.value_or(DType::F32);
          if (r.keep_float || r.type) bits = t == DType::Q8 ? 8 : t == DType::Q4 ? 4 : 16;
        }
        return bits;
      };
    }
    ValueRanges ranges;
    if (!ho.fp16) {
      ranges = collect_value_ranges(m, read_calib_jsonl(o.calib), o.threads, log);
      ho.range = [&ranges](const std::string& v, float* lo, float* hi) {
        const auto it = ranges.find(v);
        if (it == ranges.end()) return false;
        *lo = it->second.first, *hi = it->second.second;
        return true;
      };
    }
    HtpBackend b(m, ho);
    for (const Graph& g : m.graphs()) {
      const auto t0 = std::chrono::steady_clock::now();
      const bool any = b.delegate_for(g) != nullptr;
      const HtpGraphReport& r = b.report().back();
      if (any)
        log(fmt::format(
            "{}: {} of {} ops in {} HTP graphs ({}), finalized for {} in {:.0f} ms", g.name,
            r.htp_ops, r.ops, r.segments, o.quant, o.target,
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count()));
    }
    payload = b.section();
  }  // the mapping is closed before the file is rewritten
  set_evb_section(path, SectionId::Htp, std::move(payload));
  log(fmt::format("stored the {} context binary in {}", o.target, path.string()));
}

}  // namespace edgevl::compiler
