#include "runtime/execution/htp_delegate.h"

#include <cstring>

#include "backend/cpu/bf16_panels.h"
#include "backend/cpu/quant.h"
#include "backend/qnn/htp_graph.h"
#include "backend/qnn/htp_lowering.h"
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

class HtpDelegate final : public GraphDelegate {
 public:
  struct Part {
    qnn::HtpSegment seg;
    qnn::HtpGraph* graph = nullptr;
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
    // The fp16 build's inputs and outputs are f16: converted here, at the boundary. Outputs go
    // through staging anyway: one may take the slot of an input it was computed from, and the
    // caller's buffer for the graph output holds only the valid rows.
    in_.resize(p.seg.inputs.size());
    out_.resize(p.seg.outputs.size());
    std::vector<std::span<const uint8_t>> in;
    for (size_t i = 0; i < p.seg.inputs.size(); ++i) {
      const int32_t id = p.seg.inputs[i];
      const float* src = r.f(id);
      std::vector<uint16_t>& h = in_[i];
      h.resize(elems(id));
      for (size_t k = 0; k < h.size(); ++k) h[k] = f32_to_f16(src[k]);
      in.emplace_back(reinterpret_cast<const uint8_t*>(h.data()), h.size() * 2);
    }
    std::vector<std::span<uint8_t>> out;
    for (size_t i = 0; i < p.seg.outputs.size(); ++i) {
      out_[i].resize(elems(p.seg.outputs[i]));
      out.emplace_back(reinterpret_cast<uint8_t*>(out_[i].data()), out_[i].size() * 2);
    }
    const qnn::HtpRunStats st = p.graph->execute(in, out);
    *cycles_ += st.accel_cycles;
    ++*executes_;
    for (size_t i = 0; i < p.seg.outputs.size(); ++i) {
      const int32_t id = p.seg.outputs[i];
      const size_t n = size_t(r.rows_of(id) * g.values[size_t(id)].shape.back());
      float* dst = r.f(id);
      for (size_t k = 0; k < n; ++k) dst[k] = f16_to_f32(out_[i][k]);
      if (r.dump) r.dump(g.name, g.values[size_t(id)].name, dst, r.rows_of(id), r.cols(id));
    }
  }

 private:
  std::vector<Part> parts_;
  std::vector<Span> spans_;
  std::shared_ptr<uint64_t> cycles_, executes_;
  mutable std::vector<std::vector<uint16_t>> in_, out_;
};

}  // namespace

HtpBackend::HtpBackend(const Model& m, const HtpOptions& o) : model_(m), opts_(o) {
  ctx_ = std::make_unique<qnn::HtpContext>(qnn::HtpTarget::parse(o.target));
}

HtpBackend::~HtpBackend() = default;

std::unique_ptr<GraphDelegate> HtpBackend::delegate_for(const Graph& g) {
  std::vector<qnn::HtpSegment> segs = qnn::htp_partition(g);
  HtpGraphReport rep{g.name, int32_t(g.ops.size()), 0, int32_t(segs.size()), {}};
  std::vector<bool> on_htp(g.ops.size(), false);
  for (const auto& s : segs)
    for (int32_t i = s.first_op; i < s.end_op; ++i) on_htp[size_t(i)] = true;
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
  if (segs.empty()) return nullptr;
  const qnn::WeightFn weight = [&](int32_t i) { return weight_as_f32(model_, i); };
  const qnn::WeightShapeFn shape = [&](int32_t i) { return model_.weight(i).shape; };
  std::vector<HtpDelegate::Part> parts;
  for (qnn::HtpSegment& s : segs) {
    qnn::HtpGraph& hg = ctx_->graph(s.name, opts_.fp16);
    qnn::lower_segment(g, s, hg, weight, shape, {opts_.fp16});
    hg.finalize();
    parts.push_back({std::move(s), &hg});
  }
  return std::make_unique<HtpDelegate>(std::move(parts), cycles_, executes_);
}

}  // namespace edgevl
