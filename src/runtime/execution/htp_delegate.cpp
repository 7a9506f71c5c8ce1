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
#include "runtime/execution/htp_state_io.h"
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
    // The HTP graph's inputs and outputs in its order (extras, then values).
    std::vector<qnn::QnnType> in_types, out_types;
    std::vector<std::vector<uint32_t>> out_dims;
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
    // The graph's order: the runtime's state first, then the boundary values, converted here
    // to the graph's types (f16, or uint16 with the calibrated encodings). Outputs go through
    // staging anyway: one may take the slot of an input it was computed from, and the caller's
    // buffer for the graph output holds only the valid rows.
    // Self-attention on the HTP attends over every row of the graph: only whole runs may use it.
    for (int32_t i = p.seg.first_op; i < p.seg.end_op && r.rows != g.width; ++i)
      check(g.ops[size_t(i)].type != OpType::SelfAttention,
            "internal: graph '{}' run on {} of its {} rows with self-attention on the HTP", g.name,
            r.rows, g.width);
    const size_t n_xin = p.seg.extra_inputs.size(), n_xout = p.seg.extra_outputs.size();
    in_.resize(n_xin + p.seg.inputs.size());
    out_.resize(n_xout + p.seg.outputs.size());
    std::vector<std::span<const uint8_t>> in;
    for (size_t i = 0; i < n_xin; ++i) {
      htp_state_input(p.seg, p.seg.extra_inputs[i], r, in_[i]);
      in.emplace_back(in_[i]);
    }
    for (size_t i = 0; i < p.seg.inputs.size(); ++i) {
      const int32_t id = p.seg.inputs[i];
      to_htp(r.f(id), elems(id), p.in_types[n_xin + i], in_[n_xin + i]);
      in.emplace_back(in_[n_xin + i]);
    }
    std::vector<std::span<uint8_t>> out;
    for (size_t i = 0; i < out_.size(); ++i) {
      size_t n = 1;
      for (uint32_t d : p.out_dims[i]) n *= d;
      out_[i].resize(n * p.out_types[i].element_bytes());
      out.emplace_back(out_[i]);
    }
    const qnn::HtpRunStats st = p.graph->execute(in, out);
    *cycles_ += st.accel_cycles;
    ++*executes_;
    // The chunk's keys and values (KNew, VNew of each attention, in pairs) into the caches.
    for (size_t i = 0; i + 1 < n_xout; i += 2)
      htp_store_kv(p.seg.extra_outputs[i].index, out_[i], out_[i + 1], r);
    for (size_t i = 0; i < p.seg.outputs.size(); ++i) {
      const int32_t id = p.seg.outputs[i];
      const size_t n = size_t(r.rows_of(id) * g.values[size_t(id)].shape.back());
      float* dst = r.f(id);
      from_htp(out_[n_xout + i], n, p.out_types[n_xout + i], dst);
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

// On x86 hosts the QNN HTP library is Qualcomm's simulator build.
#if defined(__x86_64__) || defined(__i386__)
constexpr bool kHtpSimulatorHost = true;
#else
constexpr bool kHtpSimulatorHost = false;
#endif

std::string requested_target(const std::string& t) {
  return t == "htp" ? "htp-v75" : t;
}

// The segment of a recorded graph, checked against the model's graph: a corrupted or foreign
// section must fail here with a message, not inside the accelerator.
qnn::HtpSegment checked_segment(const Graph& g, const qnn::HtpSegmentRecord& r,
                                const std::string& what) {
  check(r.end_op <= int32_t(g.ops.size()), "{}: segment {} ends at op {} of {}", what, r.name,
        r.end_op, g.ops.size());
  qnn::HtpSegment seg{r.first_op, r.end_op, {}, {}, r.name, {}, {}, 0};
  for (const auto* io : {&r.inputs, &r.outputs})
    for (const qnn::HtpIoTensor& t : *io)
      if (t.role == qnn::HtpIoRole::KPast && t.desc.dims.size() == 3)
        seg.context = int32_t(t.desc.dims[1]);
  auto take = [&](const std::vector<qnn::HtpIoTensor>& io, std::vector<int32_t>& ids,
                  std::vector<qnn::HtpIo>& extras) {
    for (const qnn::HtpIoTensor& t : io) {
      std::vector<uint32_t> dims;
      if (t.role != qnn::HtpIoRole::Value) {
        // The runtime's state comes before the values (the graph's order).
        check(ids.empty(), "{}: segment {}: tensor {} after the values", what, r.name, t.desc.name);
        extras.push_back({t.role, t.value});
        dims = qnn::htp_io_dims(g, seg, extras.back());
      } else {
        check(t.value >= 0 && t.value < int32_t(g.values.size()) &&
                  g.values[size_t(t.value)].kind == ValueKind::Activation,
              "{}: segment {} names value {}, not an activation of graph {}", what, r.name, t.value,
              g.name);
        for (int64_t d : g.values[size_t(t.value)].shape) dims.push_back(uint32_t(d));
        ids.push_back(t.value);
      }
      check(dims == t.desc.dims, "{}: segment {}: tensor {} does not have the shape expected", what,
            r.name, t.desc.name);
    }
  };
  take(r.inputs, seg.inputs, seg.extra_inputs);
  take(r.outputs, seg.outputs, seg.extra_outputs);
  return seg;
}

// The segment's HTP graph inputs / outputs in their order, with the model graph's ids.
std::vector<qnn::HtpIoTensor> io_record(const std::vector<qnn::HtpIo>& extras,
                                        const std::vector<int32_t>& values,
                                        const std::vector<qnn::HtpTensorDesc>& descs) {
  check(descs.size() == extras.size() + values.size(),
        "internal: HTP graph has {} tensors, {} "
        "expected",
        descs.size(), extras.size() + values.size());
  std::vector<qnn::HtpIoTensor> rec;
  for (size_t i = 0; i < descs.size(); ++i)
    rec.push_back(i < extras.size() ? qnn::HtpIoTensor{extras[i].role, extras[i].index, descs[i]}
                                    : qnn::HtpIoTensor{qnn::HtpIoRole::Value,
                                                       values[i - extras.size()], descs[i]});
  return rec;
}

// Attention on the HTP needs rows of one sequence (not a decode batch's per-row caches).
bool single_sequence(const Graph& g) {
  return g.name == "prefill" || g.name == "decode";
}

}  // namespace

HtpDelegate::Part make_part(qnn::HtpSegment seg, qnn::HtpGraph& hg) {
  HtpDelegate::Part part{std::move(seg), &hg, {}, {}, {}};
  for (const auto& d : hg.input_descs()) part.in_types.push_back(d.type);
  for (const auto& d : hg.output_descs()) {
    part.out_types.push_back(d.type);
    part.out_dims.push_back(d.dims);
  }
  return part;
}

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
    // The x86 library (the simulator) fails on, or crashes in, a context whose graphs share
    // weights ("Shared weights buffer isn't supported on this platform"): refuse it first.
    check(!section_->s.shared_weights || !kHtpSimulatorHost,
          "{}: its {} graphs share weights (compile --htp-share-weights), which the x86 HTP "
          "simulator cannot load (a device can); compile without it to run it here",
          m.file().path(), compiled);
    ctx_ = std::make_unique<qnn::HtpContext>(section_->s.target, section_->s.binary_view);
    from_binary_ = true;
  } else {
    section_->s.target = qnn::HtpTarget::parse(requested_target(o.target));
    section_->s.fp16 = o.fp16;
    section_->s.shared_weights = o.share_weights;
    ctx_ = std::make_unique<qnn::HtpContext>(section_->s.target, o.share_weights);
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
        parts.push_back(make_part(std::move(seg), ctx_->retrieve(r.name, in, out)));
      }
    }
  } else {
    const qnn::WeightFn weight = [&](int32_t i) { return weight_as_f32(model_, i); };
    const qnn::WeightShapeFn shape = [&](int32_t i) { return model_.weight(i).shape; };
    // The InternViT tower ("vision") always runs all its rows: its attention needs no mask.
    const qnn::HtpCaps caps{single_sequence(g), g.name == "vision", opts_.split_layers};
    qnn::HtpGraphRecord rec{g.name, {}};
    for (qnn::HtpSegment& s : qnn::htp_partition(g, 2, caps, model_.runtime_config().context)) {
      qnn::HtpGraph& hg = ctx_->graph(s.name, opts_.fp16);
      qnn::lower_segment(g, s, hg, weight, shape,
                         {opts_.fp16, opts_.range, opts_.weight_bits, opts_.weight_override});
      hg.finalize();
      rec.segments.push_back({s.first_op, s.end_op, s.name,
                              io_record(s.extra_inputs, s.inputs, hg.input_descs()),
                              io_record(s.extra_outputs, s.outputs, hg.output_descs())});
      parts.push_back(make_part(std::move(s), hg));
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
  std::string out = fmt::format("HTP: {} ({}), context binary {:.1f} KB{}\n", s.target.name(),
                                s.fp16 ? "fp16" : "quantized", double(s.binary_view.size()) / 1024,
                                s.shared_weights ? ", graphs share weights" : "");
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
    uint32_t kv_slots = 0;  // attention on the HTP: the KV cache's slots as graph inputs
    for (const auto& seg : rec.segments)
      for (const auto& t : seg.inputs)
        if (t.role == qnn::HtpIoRole::KPast && t.desc.dims.size() == 3) kv_slots = t.desc.dims[1];
    out += fmt::format(
        "  {:<12} {:>2} HTP graphs, {} of {} ops on the HTP; on the CPU: {}{}\n", rec.graph,
        rec.segments.size(), htp_ops, on.size(), cpu.empty() ? "none" : cpu,
        kv_slots ? fmt::format("; KV cache as graph I/O ({} tokens)", kv_slots) : std::string());
  }
  return out;
}

}  // namespace edgevl
