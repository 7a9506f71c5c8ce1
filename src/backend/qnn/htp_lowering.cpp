#include "backend/qnn/htp_lowering.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "core/dtype.h"
#include "core/error.h"

namespace edgevl::qnn {

namespace {

bool is_activation(const Graph& g, int32_t id) {
  return g.values[size_t(id)].kind == ValueKind::Activation;
}

// QNN tensor names: the value's name made an identifier, prefixed by its graph and id to stay
// unique in the whole context (the HTP backend does not keep graphs' names apart).
std::string tensor_name(const Graph& g, int32_t id) {
  std::string n = g.name + "_v" + std::to_string(id) + "_" + g.values[size_t(id)].name;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

std::vector<uint32_t> dims_of(const std::vector<int64_t>& shape) {
  std::vector<uint32_t> d;
  for (int64_t s : shape) d.push_back(uint32_t(s));
  return d;
}

// Builds one segment: values are QNN tensor ids once created.
class Lowering {
 public:
  Lowering(const Graph& g, const HtpSegment& s, HtpGraph& out, const WeightFn& weight,
           const WeightShapeFn& weight_shape, const HtpPrecision& p)
      : g_(g), s_(s), out_(out), weight_(weight), weight_shape_(weight_shape), p_(p) {}

  void run() {
    for (int32_t id : s_.inputs)
      ids_[id] =
          out_.input(tensor_name(g_, id), dims_of(g_.values[size_t(id)].shape), act_type(id));
    for (int32_t i = s_.first_op; i < s_.end_op; ++i) lower(g_.ops[size_t(i)]);
  }

 private:
  QnnType weight_type() const { return p_.fp16 ? QnnType::f16() : QnnType::f32(); }
  // HTP ops take one type for all their operands: the fp16 build is f16 throughout, its inputs
  // and outputs included (the runtime converts at the boundary); the a16w8 build encodes each
  // activation by its calibrated range.
  QnnType act_type(int32_t id) const {
    if (p_.fp16) return QnnType::f16();
    const std::string& name = g_.values[size_t(id)].name;
    float lo = 0, hi = 0;
    check(p_.range && p_.range(name, &lo, &hi),
          "HTP a16w8: no calibrated range for {} (graph {}): calibrate with samples that run it",
          name, g_.name);
    return u16_encoding(lo, hi);
  }
  QnnType range_type(float lo, float hi) const {
    return p_.fp16 ? QnnType::f16() : u16_encoding(lo, hi);
  }
  // The range a value was encoded with (its calibrated one).
  void range_of(int32_t id, float* lo, float* hi) const {
    const QnnType t = act_type(id);
    *lo = t.scales[0] * float(t.offsets[0]);
    *hi = t.scales[0] * float(65535 + t.offsets[0]);
  }

  enum class Role { Matrix, NormParam };
  int weight(int32_t id, const std::vector<uint32_t>& dims, Role role = Role::NormParam) {
    if (auto it = ids_.find(id); it != ids_.end()) return it->second;
    const Value& v = g_.values[size_t(id)];
    std::vector<float> f = weight_(v.weight);
    size_t n = 1;
    for (uint32_t d : dims) n *= d;
    check(f.size() == n, "HTP lowering: weight {} has {} values, {} expected", v.name, f.size(), n);
    std::vector<uint8_t> bytes;
    QnnType t;
    if (p_.fp16) {
      t = QnnType::f16();
      bytes.resize(n * 2);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(f[i]);
        std::memcpy(&bytes[i * 2], &h, 2);
      }
    } else if (role == Role::Matrix) {
      // int8, symmetric, one scale per output channel (row of [N, K]).
      const size_t rows = dims.front(), cols = n / rows;
      t = {api::kSFixed8, std::vector<float>(rows), std::vector<int32_t>(rows, 0), 0, 0};
      bytes.resize(n);
      for (size_t r = 0; r < rows; ++r) {
        float a = 1e-12f;
        for (size_t c = 0; c < cols; ++c) a = std::max(a, std::fabs(f[r * cols + c]));
        t.scales[r] = a / 127.f;
        for (size_t c = 0; c < cols; ++c)
          bytes[r * cols + c] =
              uint8_t(int8_t(std::clamp(std::lround(f[r * cols + c] / t.scales[r]), -127L, 127L)));
      }
      matrix_scales_[id] = t.scales;
    } else {
      float a = 1e-12f;
      for (float x : f) a = std::max(a, std::fabs(x));
      t = u16_symmetric(a);
      bytes = encode_u16(f, t);
    }
    return ids_[id] = out_.constant(tensor_name(g_, id), dims, t, bytes);
  }
  // A matmul's bias: int32 at (input scale x the weight's channel scale) when quantized.
  int bias(int32_t id, int32_t x, int32_t w, uint32_t n) {
    if (p_.fp16) return weight(id, {n});
    const std::vector<float> f = weight_(g_.values[size_t(id)].weight);
    const float sx = act_type(x).scales[0];
    const std::vector<float>& sw = matrix_scales_.at(w);
    QnnType t{api::kSFixed32, std::vector<float>(n), std::vector<int32_t>(n, 0), 0, 0};
    std::vector<uint8_t> bytes(size_t(n) * 4);
    for (uint32_t i = 0; i < n; ++i) {
      t.scales[i] = sx * sw[i];
      const int32_t q = int32_t(std::lround(double(f[i]) / t.scales[i]));
      std::memcpy(&bytes[size_t(i) * 4], &q, 4);
    }
    return out_.constant(tensor_name(g_, id) + "_b" + std::to_string(serial_++), {n}, t, bytes);
  }
  static std::vector<uint8_t> encode_u16(const std::vector<float>& f, const QnnType& t) {
    std::vector<uint8_t> bytes(f.size() * 2);
    for (size_t i = 0; i < f.size(); ++i) {
      const long q = std::clamp(std::lround(f[i] / t.scales[0]) - t.offsets[0], 0L, 65535L);
      const uint16_t u = uint16_t(q);
      std::memcpy(&bytes[i * 2], &u, 2);
    }
    return bytes;
  }
  std::vector<uint32_t> weight_dims(int32_t id) const {
    return dims_of(weight_shape_(g_.values[size_t(id)].weight));
  }
  int operand(int32_t id) {
    if (auto it = ids_.find(id); it != ids_.end()) return it->second;
    check(!is_activation(g_, id), "HTP lowering: {} read before it is written",
          g_.values[size_t(id)].name);
    return weight(id, weight_dims(id));
  }
  // The tensor an op writes: a segment output, else an intermediate.
  int result(int32_t id) {
    const auto dims = dims_of(g_.values[size_t(id)].shape);
    const bool is_output = std::find(s_.outputs.begin(), s_.outputs.end(), id) != s_.outputs.end();
    // A value written twice (an in-place op) gets a fresh tensor each time: QNN graphs are SSA.
    std::string name =
        tensor_name(g_, id) + (ids_.count(id) ? "_" + std::to_string(serial_++) : "");
    return ids_[id] = is_output && last_writer(id) ? out_.output(name, dims, act_type(id))
                                                   : out_.native(name, dims, act_type(id));
  }
  // An intermediate of the lowering, with the type of value `like` or of the range [lo, hi].
  int temp(const std::string& base, std::vector<uint32_t> dims, int32_t like) {
    return out_.native(base + "_t" + std::to_string(serial_++), std::move(dims), act_type(like));
  }
  int temp(const std::string& base, std::vector<uint32_t> dims, float lo, float hi) {
    return out_.native(base + "_t" + std::to_string(serial_++), std::move(dims),
                       range_type(lo, hi));
  }
  bool last_writer(int32_t id) const {
    for (int32_t i = cur_ + 1; i < s_.end_op; ++i)
      if (g_.ops[size_t(i)].output == id) return false;
    return true;
  }

  void lower(const Op& op) {
    cur_ = int32_t(&op - g_.ops.data());
    const std::string n = "op" + std::to_string(cur_);
    const auto& in = op.inputs;
    const auto out_dims = dims_of(g_.values[size_t(op.output)].shape);
    switch (op.type) {
      case OpType::RmsNorm:
      case OpType::LayerNorm: {
        const NormAttrs na = op.norm();
        const uint32_t cols = out_dims.back(), rows = out_dims.front();
        const uint32_t c = na.group > 0 ? uint32_t(na.group) : cols;
        std::vector<int> operands = {operand(in[0]), weight(in[1], {c})};
        if (op.type == OpType::LayerNorm) operands.push_back(weight(in[2], {c}));
        std::vector<QnnParam> params = {QnnParam::f32("epsilon", na.eps),
                                        QnnParam::u32_tensor("axes", {1}, {1})};
        const char* type = op.type == OpType::RmsNorm ? "RmsNorm" : "LayerNorm";
        if (c == cols) {
          out_.node(n, type, operands, {result(op.output)}, params);
          break;
        }
        // Per-group norm (Qwen3's per-head q/k norm): rows of `c` columns, then back.
        const std::vector<uint32_t> grouped = {rows * (cols / c), c};
        int x = temp(n, grouped, in[0]), y = temp(n, grouped, op.output);
        out_.node(n + "_in", "Reshape", {operands[0]}, {x});
        operands[0] = x;
        out_.node(n, type, operands, {y}, params);
        out_.node(n + "_out", "Reshape", {y}, {result(op.output)});
        break;
      }
      case OpType::MatMul: {
        const MatMulAttrs mm = op.matmul();
        std::vector<int> operands = {operand(in[0]),
                                     weight(in[1], weight_dims(in[1]), Role::Matrix)};
        if (op.bias() >= 0) operands.push_back(bias(op.bias(), in[0], in[1], out_dims.back()));
        if (mm.epilogue == Epilogue::kNone) {
          out_.node(n, "FullyConnected", operands, {result(op.output)});
          break;
        }
        int product = temp(n, out_dims, mm.pre);
        out_.node(n, "FullyConnected", operands, {product});
        if (mm.epilogue == Epilogue::kGeluErf)
          out_.node(n + "_gelu", "Gelu", {product}, {result(op.output)});
        else
          out_.node(n + "_add", "ElementWiseAdd", {product, operand(op.residual())},
                    {result(op.output)});
        break;
      }
      case OpType::SiluMul: {  // silu(gate) * up = gate * sigmoid(gate) * up
        int gate = operand(in[0]), up = operand(in[1]);
        float glo = 0, ghi = 0;
        if (!p_.fp16) range_of(in[0], &glo, &ghi);
        // silu's range: its minimum is -0.2785 (at -1.278), its maximum the gate's.
        int s = temp(n, out_dims, 0.f, 1.f), gs = temp(n, out_dims, -0.2785f, std::max(ghi, 0.f));
        out_.node(n + "_sig", "Sigmoid", {gate}, {s});
        out_.node(n + "_silu", "ElementWiseMultiply", {gate, s}, {gs});
        out_.node(n, "ElementWiseMultiply", {gs, up}, {result(op.output)});
        break;
      }
      case OpType::Add: {
        int a = operand(in[0]), b = operand(in[1]);
        out_.node(n, "ElementWiseAdd", {a, b}, {result(op.output)});
        break;
      }
      case OpType::GeluErf: {
        int x = operand(in[0]);
        out_.node(n, "Gelu", {x}, {result(op.output)});
        break;
      }
      default: fail("HTP lowering: op {} is not supported on the HTP", op_name(op.type));
    }
  }

  const Graph& g_;
  const HtpSegment& s_;
  HtpGraph& out_;
  const WeightFn& weight_;
  const WeightShapeFn& weight_shape_;
  HtpPrecision p_;
  std::map<int32_t, int> ids_;  // value id -> QNN tensor (its latest version)
  std::map<int32_t, std::vector<float>> matrix_scales_;  // a16w8: per-channel weight scales
  int32_t cur_ = 0;
  int serial_ = 0;
};

}  // namespace

QnnType u16_encoding(float lo, float hi) {
  lo = std::min(lo, 0.f);
  hi = std::max(hi, 0.f);
  const float scale = std::max(hi - lo, 1e-8f) / 65535.f;
  return QnnType::quant(api::kUFixed16, scale, int32_t(std::lround(lo / scale)));
}

QnnType u16_symmetric(float absmax) {
  return QnnType::quant(api::kUFixed16, std::max(absmax, 1e-12f) / 32767.f, -32768);
}

bool htp_supports(const Graph& g, const Op& op) {
  switch (op.type) {
    case OpType::RmsNorm:
    case OpType::LayerNorm:
    case OpType::MatMul:
    case OpType::SiluMul:
    case OpType::Add:
    case OpType::GeluErf: break;
    default: return false;  // Rope, Attention, SelfAttention, PixelShuffle, PatchIm2col: on the CPU
  }
  // Values the CPU hands over as bf16 tile blocks are in a layout only its kernels read.
  auto blocks = [&](int32_t id) { return id >= 0 && g.values[size_t(id)].bf16_blocks; };
  if (blocks(op.output)) return false;
  for (int32_t id : op.inputs)
    if (blocks(id)) return false;
  return true;
}

std::vector<HtpSegment> htp_partition(const Graph& g, int min_ops) {
  std::vector<HtpSegment> segs;
  const int32_t n = int32_t(g.ops.size());
  for (int32_t i = 0; i < n;) {
    if (!htp_supports(g, g.ops[size_t(i)])) {
      ++i;
      continue;
    }
    int32_t j = i;
    while (j < n && htp_supports(g, g.ops[size_t(j)])) ++j;
    // A matmul alone is worth a call (the LM head); shorter elementwise runs are not.
    bool has_matmul = false;
    for (int32_t k = i; k < j; ++k) has_matmul |= g.ops[size_t(k)].type == OpType::MatMul;
    if (j - i >= min_ops || has_matmul) segs.push_back({i, j, {}, {}, {}});
    i = j;
  }
  // Boundary values: read inside before written inside (inputs); written inside and read after,
  // or the graph's result (outputs).
  for (size_t k = 0; k < segs.size(); ++k) {
    HtpSegment& s = segs[k];
    s.name = g.name + "_seg" + std::to_string(k);
    std::set<int32_t> written;
    for (int32_t i = s.first_op; i < s.end_op; ++i) {
      const Op& op = g.ops[size_t(i)];
      for (int32_t id : op.inputs)
        if (is_activation(g, id) && !written.count(id) &&
            std::find(s.inputs.begin(), s.inputs.end(), id) == s.inputs.end())
          s.inputs.push_back(id);
      written.insert(op.output);
    }
    for (int32_t id : written) {
      bool read_after = id == g.output;
      for (int32_t i = s.end_op; i < n && !read_after; ++i)
        for (int32_t r : g.ops[size_t(i)].inputs) read_after |= r == id;
      if (read_after) s.outputs.push_back(id);
    }
  }
  return segs;
}

void lower_segment(const Graph& g, const HtpSegment& s, HtpGraph& out, const WeightFn& weight,
                   const WeightShapeFn& weight_shape, const HtpPrecision& p) {
  Lowering(g, s, out, weight, weight_shape, p).run();
}

}  // namespace edgevl::qnn
