#include "runtime/execution/htp_delegate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "backend/cpu/bf16_panels.h"
#include "backend/cpu/quant.h"
#include "backend/qnn/htp_graph.h"
#include "backend/qnn/htp_lowering.h"
#include "backend/qnn/htp_section.h"
#include "core/error.h"
#include "runtime/execution/op_runners.h"

namespace edgevl {

std::vector<float> weight_as_f32(const Model& m, int32_t index) {
  const TensorEntry& e = m.weight(index);
  const void* data = m.weight_data(index);
  const int64_t n = e.numel();
  std::vector<float> out(size_t(n), 0.f);
  const int64_t N = e.shape.front(), K = e.shape.size() > 1 ? e.shape[1] : 1;
  switch (e.dtype) {
    case DType::F32: std::memcpy(out.data(), data, size_t(n) * 4); break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i)
        out[size_t(i)] = f16_to_f32(static_cast<const uint16_t*>(data)[i]);
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i)
        out[size_t(i)] = bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
      break;
    case DType::BF16P: {
      std::vector<uint16_t> rows(static_cast<size_t>(n));
      cpu::unpack_bf16_panels(static_cast<const uint16_t*>(data), N, K, 0, N, rows.data());
      for (int64_t i = 0; i < n; ++i) out[size_t(i)] = bf16_to_f32(rows[size_t(i)]);
      break;
    }
    case DType::Q8: cpu::q8_unpack(static_cast<const uint8_t*>(data), N, K, out.data()); break;
    case DType::Q4:
      cpu::q4_unpack(static_cast<const uint8_t*>(data), N, K, e.group, e.zero_point, out.data());
      break;
    default: fail("weight {} of type {} cannot be read as floats", e.name, e.type_name());
  }
  return out;
}

namespace {

// f32 rows <-> an HTP graph's input / output type (f16, uint16 with its encoding, f32).
void to_htp(const float* x, size_t n, const qnn::QnnType& t, std::vector<uint8_t>& out) {
  out.resize(n * t.element_bytes());
  if (t.type == qnn::api::kFloat16) {
    for (size_t i = 0; i < n; ++i) {
      const uint16_t h = f32_to_f16(x[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  } else if (t.type == qnn::api::kUFixed16) {
    const float inv = 1.f / t.scales[0];
    const float off = float(t.offsets[0]);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t q = uint16_t(std::clamp(std::nearbyint(x[i] * inv - off), 0.f, 65535.f));
      std::memcpy(&out[i * 2], &q, 2);
    }
  } else {
    check(t.type == qnn::api::kFloat32, "HTP: boundary type {:#x} not handled", uint32_t(t.type));
    std::memcpy(out.data(), x, n * 4);
  }
}

void from_htp(const std::vector<uint8_t>& in, size_t n, const qnn::QnnType& t, float* y) {
  if (t.type == qnn::api::kFloat16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, &in[i * 2], 2);
      y[i] = f16_to_f32(h);
    }
  } else if (t.type == qnn::api::kUFixed16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t q;
      std::memcpy(&q, &in[i * 2], 2);
      y[i] = t.scales[0] * (float(q) + float(t.offsets[0]));
    }
  } else {
    std::memcpy(y, in.data(), n * 4);
  }
}

class HtpDelegate final : public GraphDelegate {
 public:
  struct Part {
    qnn::HtpSegment seg;
    qnn::HtpGraph* graph = nullptr;
    std::vector<qnn::QnnType> in_types, out_types;
  };
  HtpDelegate(std::vector<Part> parts, std::shared_ptr<uint64_t> cycles,
              std::shared_ptr<uint64_t> executes)
      : parts_(std::move(parts)), cycles_(std::move(cycles)), executes_(std::move(executes)) {
    for (const Part& p : parts_) spans_.push_back({p.seg.first_op, p.seg.end_op});
  }
  const std::vector<Span>& spans() const override { return spans_; }
  const char* name() const override { return "htp"; }

  void run(size_t span, const GraphRun& r) const override {
    const Part& p = parts_[span];
    const Graph& g = r.graph();
    auto elems = [&](int32_t id) {
      const auto& s = g.values[size_t(id)].shape;
      return size_t(s.front() * s.back());
    };
    // The boundary values are converted here to the graph's types (f16, or uint16 with the
    // calibrated encodings). Outputs go through staging anyway: one may take the slot of an
    // input it was computed from, and the caller's buffer for the graph output holds only the
    // valid rows.
    in_.resize(p.seg.inputs.size());
    out_.resize(p.seg.outputs.size());
    std::vector<std::span<const uint8_t>> in;
    for (size_t i = 0; i < p.seg.inputs.size(); ++i) {
      const int32_t id = p.seg.inputs[i];
      to_htp(r.f(id), elems(id), p.in_types[i], in_[i]);
      in.emplace_back(in_[i]);
    }
    std::vector<std::span<uint8_t>> out;
    for (size_t i = 0; i < p.seg.outputs.size(); ++i) {
      out_[i].resize(elems(p.seg.outputs[i]) * p.out_types[i].element_bytes());
      out.emplace_back(out_[i]);
    }
    const qnn::HtpRunStats st = p.graph->execute(in, out);
    *cycles_ += st.accel_cycles;
    ++*executes_;
    for (size_t i = 0; i < p.seg.outputs.size(); ++i) {
      const int32_t id = p.seg.outputs[i];
      const size_t n = size_t(r.rows_of(id) * g.values[size_t(id)].shape.back());
      float* dst = r.f(id);
      from_htp(out_[i], n, p.out_types[i], dst);
      if (r.dump) r.dump(g.name, g.values[size_t(id)].name, dst, r.rows_of(id), r.cols(id));
    }
  }

 private:
  std::vector<Part> parts_;
  std::vector<Span> spans_;
  std::shared_ptr<uint64_t> cycles_, executes_;
  mutable std::vector<std::vector<uint8_t>> in_, out_;
};

}  // namespace

struct HtpSectionHolder {
  qnn::HtpSection s;
};

namespace {

std::string requested_target(const std::string& t) {
  return t == "htp" ? "htp-v75" : t;
}

// The segment of a recorded graph, checked against the model's graph: a corrupted or foreign
// section must fail here with a message, not inside the accelerator.
qnn::HtpSegment checked_segment(const Graph& g, const qnn::HtpSegmentRecord& r,
                                const std::string& what) {
  check(r.end_op <= int32_t(g.ops.size()), "{}: segment {} ends at op {} of {}", what, r.name,
        r.end_op, g.ops.size());
  qnn::HtpSegment seg{r.first_op, r.end_op, {}, {}, r.name};
  auto take = [&](const std::vector<qnn::HtpIoTensor>& io, std::vector<int32_t>& ids) {
    for (const qnn::HtpIoTensor& t : io) {
      check(t.value >= 0 && t.value < int32_t(g.values.size()) &&
                g.values[size_t(t.value)].kind == ValueKind::Activation,
            "{}: segment {} names value {}, not an activation of graph {}", what, r.name, t.value,
            g.name);
      const auto& shape = g.values[size_t(t.value)].shape;
      std::vector<uint32_t> dims;
      for (int64_t d : shape) dims.push_back(uint32_t(d));
      check(dims == t.desc.dims, "{}: segment {}: tensor {} does not have the shape of {}", what,
            r.name, t.desc.name, g.values[size_t(t.value)].name);
      ids.push_back(t.value);
    }
  };
  take(r.inputs, seg.inputs);
  take(r.outputs, seg.outputs);
  return seg;
}

}  // namespace

HtpBackend::HtpBackend(const Model& m, const HtpOptions& o) : model_(m), opts_(o) {
  const auto t0 = std::chrono::steady_clock::now();
  section_ = std::make_unique<HtpSectionHolder>();
  if (m.file().has_section(SectionId::Htp)) {
    const std::string what = m.file().path() + " section 'htp'";
    section_->s = qnn::parse_htp_section(m.file().section(SectionId::Htp), what);
    const std::string compiled = section_->s.target.name();
    check(o.target == "htp" || o.target == compiled,
          "{} was compiled for {}; it cannot run on {} (compile it again with --target {})",
          m.file().path(), compiled, o.target, o.target);
    opts_.fp16 = section_->s.fp16;
    ctx_ = std::make_unique<qnn::HtpContext>(section_->s.target, section_->s.binary_view);
    from_binary_ = true;
  } else {
    section_->s.target = qnn::HtpTarget::parse(requested_target(o.target));
    section_->s.fp16 = o.fp16;
    ctx_ = std::make_unique<qnn::HtpContext>(section_->s.target);
  }
  load_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

HtpBackend::~HtpBackend() = default;

std::string HtpBackend::target() const {
  return section_->s.target.name();
}

std::unique_ptr<GraphDelegate> HtpBackend::delegate_for(const Graph& g) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<HtpDelegate::Part> parts;
  if (from_binary_) {
    const std::string what = model_.file().path() + " section 'htp'";
    for (const qnn::HtpGraphRecord& rec : section_->s.graphs) {
      if (rec.graph != g.name) continue;
      for (const qnn::HtpSegmentRecord& r : rec.segments) {
        qnn::HtpSegment seg = checked_segment(g, r, what);
        std::vector<qnn::HtpTensorDesc> in, out;
        for (const auto& t : r.inputs) in.push_back(t.desc);
        for (const auto& t : r.outputs) out.push_back(t.desc);
        HtpDelegate::Part part{std::move(seg), &ctx_->retrieve(r.name, in, out), {}, {}};
        for (const auto& d : in) part.in_types.push_back(d.type);
        for (const auto& d : out) part.out_types.push_back(d.type);
        parts.push_back(std::move(part));
      }
    }
  } else {
    const qnn::WeightFn weight = [&](int32_t i) { return weight_as_f32(model_, i); };
    const qnn::WeightShapeFn shape = [&](int32_t i) { return model_.weight(i).shape; };
    qnn::HtpGraphRecord rec{g.name, {}};
    for (qnn::HtpSegment& s : qnn::htp_partition(g)) {
      qnn::HtpGraph& hg = ctx_->graph(s.name, opts_.fp16);
      qnn::lower_segment(g, s, hg, weight, shape, {opts_.fp16, opts_.range});
      hg.finalize();
      qnn::HtpSegmentRecord r{s.first_op, s.end_op, s.name, {}, {}};
      const auto in = hg.input_descs(), out = hg.output_descs();
      for (size_t i = 0; i < in.size(); ++i) r.inputs.push_back({s.inputs[i], in[i]});
      for (size_t i = 0; i < out.size(); ++i) r.outputs.push_back({s.outputs[i], out[i]});
      rec.segments.push_back(std::move(r));
      HtpDelegate::Part part{std::move(s), &hg, {}, {}};
      for (const auto& d : in) part.in_types.push_back(d.type);
      for (const auto& d : out) part.out_types.push_back(d.type);
      parts.push_back(std::move(part));
    }
    if (!rec.segments.empty()) section_->s.graphs.push_back(std::move(rec));
  }
  load_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  HtpGraphReport rep{g.name, int32_t(g.ops.size()), 0, int32_t(parts.size()), {}};
  std::vector<bool> on_htp(g.ops.size(), false);
  for (const auto& p : parts)
    for (int32_t i = p.seg.first_op; i < p.seg.end_op; ++i) on_htp[size_t(i)] = true;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (on_htp[i]) {
      ++rep.htp_ops;
      continue;
    }
    const std::string kind = op_name(g.ops[i].type);
    if (std::find(rep.cpu_ops.begin(), rep.cpu_ops.end(), kind) == rep.cpu_ops.end())
      rep.cpu_ops.push_back(kind);
  }
  report_.push_back(rep);
  if (parts.empty()) return nullptr;
  return std::make_unique<HtpDelegate>(std::move(parts), cycles_, executes_);
}

std::vector<uint8_t> HtpBackend::section() const {
  check(!from_binary_, "internal: the HTP section of a model loaded from one");
  qnn::HtpSection s = section_->s;
  s.binary = ctx_->binary();
  return qnn::serialize_htp_section(s);
}

std::string describe_htp_section(const Model& m) {
  if (!m.file().has_section(SectionId::Htp)) return "";
  const qnn::HtpSection s =
      qnn::parse_htp_section(m.file().section(SectionId::Htp), m.file().path() + " section 'htp'");
  std::string out = fmt::format("HTP: {} ({}), context binary {:.1f} KB\n", s.target.name(),
                                s.fp16 ? "fp16" : "quantized", double(s.binary_view.size()) / 1024);
  for (const qnn::HtpGraphRecord& rec : s.graphs) {
    const Graph* g = m.find_graph(rec.graph);
    int32_t htp_ops = 0;
    std::vector<bool> on(g ? g->ops.size() : 0, false);
    for (const auto& seg : rec.segments) {
      htp_ops += seg.end_op - seg.first_op;
      for (int32_t i = seg.first_op; g && i < seg.end_op && i < int32_t(on.size()); ++i)
        on[size_t(i)] = true;
    }
    std::string cpu;
    for (size_t i = 0; i < on.size(); ++i) {
      const std::string k = op_name(g->ops[i].type);
      if (!on[i] && cpu.find(k) == std::string::npos) cpu += (cpu.empty() ? "" : ", ") + k;
    }
    out +=
        fmt::format("  {:<12} {:>2} HTP graphs, {} of {} ops on the HTP; on the CPU: {}\n",
                    rec.graph, rec.segments.size(), htp_ops, on.size(), cpu.empty() ? "none" : cpu);
  }
  return out;
}

}  // namespace edgevl
