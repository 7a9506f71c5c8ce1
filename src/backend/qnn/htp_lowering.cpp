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

std::string identifier(std::string n) {
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// QNN tensor names: the value's name made an identifier, prefixed by its graph and id to stay
// unique in the whole context (the HTP backend does not keep graphs' names apart).
std::string tensor_name(const Graph& g, int32_t id) {
  return identifier(g.name + "_v" + std::to_string(id) + "_" + g.values[size_t(id)].name);
}

std::vector<uint32_t> dims_of(const std::vector<int64_t>& shape) {
  std::vector<uint32_t> d;
  for (int64_t s : shape) d.push_back(uint32_t(s));
  return d;
}

// Rope ops that rotate by the same per-row tables (q's and k's, every layer's) share one pair
// of cos / sin inputs: the same table, head size, rotated part and MRoPE sections.
bool same_rotation(const Op& a, const Op& b) {
  return a.inputs[1] == b.inputs[1] && a.attr_i[1] == b.attr_i[1] && a.attr_i[2] == b.attr_i[2] &&
         a.attr_i[3] == b.attr_i[3];
}

const char* role_name(HtpIoRole r) {
  switch (r) {
    case HtpIoRole::RopeCos: return "rope_cos";
    case HtpIoRole::RopeSin: return "rope_sin";
    case HtpIoRole::Mask: return "mask";
    case HtpIoRole::KPast: return "k_past";
    case HtpIoRole::VPast: return "v_past";
    case HtpIoRole::KNew: return "k_new";
    case HtpIoRole::VNew: return "v_new";
    default: return "value";
  }
}

// Builds one segment: values are QNN tensor ids once created.
class Lowering {
 public:
  Lowering(const Graph& g, const HtpSegment& s, HtpGraph& out, const WeightFn& weight,
           const WeightShapeFn& weight_shape, const HtpPrecision& p)
      : g_(g), s_(s), out_(out), weight_(weight), weight_shape_(weight_shape), p_(p) {}

  void run() {
    // The runtime's state first, then the values (HtpSegment's order).
    auto extra_name = [&](const HtpIo& io) {
      return s_.name + "_" + role_name(io.role) + (io.index >= 0 ? std::to_string(io.index) : "");
    };
    for (const HtpIo& io : s_.extra_inputs)
      extra_[{int(io.role), io.index}] =
          out_.input(extra_name(io), htp_io_dims(g_, s_, io), QnnType::f16());
    for (const HtpIo& io : s_.extra_outputs)
      extra_[{int(io.role), io.index}] =
          out_.output(extra_name(io), htp_io_dims(g_, s_, io), QnnType::f16());
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

  // Float: f16 whatever the build (a matmul kept in fp16 by the overrides).
  enum class Role { Matrix, NormParam, Float };
  // The overrides' word on a matrix (HtpPrecision::weight_override), 0 when none.
  int matrix_override(int32_t id) const {
    if (p_.fp16 || !p_.weight_override) return 0;
    return p_.weight_override(g_.values[size_t(id)].name);
  }
  int weight(int32_t id, const std::vector<uint32_t>& dims, Role role = Role::NormParam) {
    if (auto it = ids_.find(id); it != ids_.end()) return it->second;
    const Value& v = g_.values[size_t(id)];
    const int ov = role == Role::Matrix ? matrix_override(id) : 0;
    const bool as_f16 = p_.fp16 || role == Role::Float || ov == 16;
    const int bits = ov == 4 || ov == 8 ? ov : p_.weight_bits;
    std::vector<float> f = weight_(v.weight);
    size_t n = 1;
    for (uint32_t d : dims) n *= d;
    check(f.size() == n, "HTP lowering: weight {} has {} values, {} expected", v.name, f.size(), n);
    std::vector<uint8_t> bytes;
    QnnType t;
    if (as_f16) {
      t = QnnType::f16();
      bytes.resize(n * 2);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(f[i]);
        std::memcpy(&bytes[i * 2], &h, 2);
      }
    } else if (role == Role::Matrix) {
      // int8 (or int4: an 8-bit type with a 4-bit encoding, one value a byte), symmetric,
      // one scale per output channel (row of [N, K]).
      const size_t rows = dims.front(), cols = n / rows;
      const bool int4 = bits == 4;
      const long qmax = int4 ? 7 : 127;
      t = {api::kSFixed8, std::vector<float>(rows), std::vector<int32_t>(rows, 0), 0,
           int4 ? 4u : 0u};
      bytes.resize(n);
      const long qmin = int4 ? -8 : -qmax;
      for (size_t r = 0; r < rows; ++r) {
        const float* w = f.data() + r * cols;
        float a = 1e-12f;
        for (size_t c = 0; c < cols; ++c) a = std::max(a, std::fabs(w[c]));
        t.scales[r] = a / float(qmax);
        // int4 has 16 codes: the scale with the least squared error over the row among
        // max|w| / d, d in [7, 11] (d = 7 is the plain grid; d > 7 uses -8 and clips the
        // largest values), as the CPU's Q4 groups choose theirs (backend/cpu/quant.h).
        if (int4) {
          double best = -1;
          for (int step = 0; step <= 16; ++step) {
            const float s = a / (7.f + 0.25f * float(step));
            double err = 0;
            for (size_t c = 0; c < cols; ++c) {
              const double e = s * std::clamp(std::round(w[c] / s), -8.f, 7.f) - w[c];
              err += e * e;
            }
            if (best < 0 || err < best) best = err, t.scales[r] = s;
          }
        }
        for (size_t c = 0; c < cols; ++c)
          bytes[r * cols + c] =
              uint8_t(int8_t(std::clamp(std::lround(w[c] / t.scales[r]), qmin, qmax)));
      }
      matrix_scales_[id] = t.scales;
    } else {
      float a = 1e-12f;
      for (float x : f) a = std::max(a, std::fabs(x));
      t = u16_symmetric(a);
      bytes = encode_u16(f, t);
    }
    return ids_[id] = out_.weight(identifier(v.name), dims, t, bytes);
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
    return out_.weight(identifier(g_.values[size_t(id)].name) + "_i32", {n}, t, bytes);
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
        if (matrix_override(in[1]) == 16) {
          lower_f16_matmul(op, n);
          break;
        }
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
      case OpType::Rope: lower_rope(op, n); break;
      case OpType::Attention: lower_attention(op, n); break;
      case OpType::SelfAttention: lower_self_attention(op, n); break;
      default: fail("HTP lowering: op {} is not supported on the HTP", op_name(op.type));
    }
  }

  int extra(HtpIoRole role, int32_t index) const {
    auto it = extra_.find({int(role), index});
    check(it != extra_.end(), "internal: HTP segment {} has no {} for op {}", s_.name,
          role_name(role), index);
    return it->second;
  }
  // The first Rope op of the segment with op's rotation: the key of its cos / sin inputs.
  int32_t rotation_of(const Op& op) const {
    for (int32_t i = s_.first_op; i < s_.end_op; ++i)
      if (g_.ops[size_t(i)].type == OpType::Rope && same_rotation(g_.ops[size_t(i)], op)) return i;
    return -1;
  }

  // A matmul the overrides keep in fp16 inside a quantized graph: its input (and residual)
  // dequantized, f16 weight and bias, its epilogue in fp16, its result quantized.
  void lower_f16_matmul(const Op& op, const std::string& n) {
    const auto& in = op.inputs;
    const MatMulAttrs mm = op.matmul();
    const auto dims = dims_of(g_.values[size_t(op.output)].shape);
    std::vector<int> operands = {f16_operand(in[0], n),
                                 weight(in[1], weight_dims(in[1]), Role::Float)};
    if (op.bias() >= 0) operands.push_back(weight(op.bias(), {dims.back()}, Role::Float));
    int y = ftemp(n, dims);
    out_.node(n + "_fc", "FullyConnected", operands, {y});
    if (mm.epilogue == Epilogue::kGeluErf) {
      const int g = ftemp(n, dims);
      out_.node(n + "_gelu", "Gelu", {y}, {g});
      y = g;
    } else if (mm.epilogue == Epilogue::kAddResidual) {
      const int r = ftemp(n, dims);
      out_.node(n + "_add", "ElementWiseAdd", {y, f16_operand(op.residual(), n)}, {r});
      y = r;
    }
    f16_result(op, y, n);
  }

  // RoPE and attention compute in fp16 in every build: their operands come in through a
  // Dequantize where the graph is quantized, and their result leaves through a Quantize to the
  // value's calibrated encoding (the HTP takes such mixed graphs; an additive mask and softmax
  // do not survive a 16-bit encoding of the scores).
  int ftemp(const std::string& base, std::vector<uint32_t> dims) {
    return out_.native(base + "_t" + std::to_string(serial_++), std::move(dims), QnnType::f16());
  }
  int f16_operand(int32_t id, const std::string& base) {
    const int x = operand(id);
    if (p_.fp16) return x;
    const int y = ftemp(base, dims_of(g_.values[size_t(id)].shape));
    out_.node(base + "_dq" + std::to_string(serial_++), "Dequantize", {x}, {y});
    return y;
  }
  // Writes fp16 tensor y ([rows, ...] of the value's element count) as the value op.output.
  void f16_result(const Op& op, int y, const std::string& n) {
    if (p_.fp16) {
      out_.node(n, "Reshape", {y}, {result(op.output)});
      return;
    }
    const int flat = ftemp(n, dims_of(g_.values[size_t(op.output)].shape));
    out_.node(n + "_flat", "Reshape", {y}, {flat});
    out_.node(n, "Quantize", {flat}, {result(op.output)});
  }

  // rotate_half as x * cos + x[perm] * sin: perm swaps the two halves of the rotated part (a
  // Gather along the head dimension), the sign of the first half is in the sin rows.
  void lower_rope(const Op& op, const std::string& n) {
    const RopeAttrs a = op.rope();
    const uint32_t w = uint32_t(g_.width), h = uint32_t(a.n_heads), d = uint32_t(a.head_dim);
    const uint32_t half = uint32_t(a.rotated()) / 2;
    std::vector<int32_t> perm(d);
    for (uint32_t i = 0; i < d; ++i)
      perm[i] = int32_t(i < half ? i + half : i < 2 * half ? i - half : i);
    std::vector<uint8_t> perm_bytes(d * 4);
    std::memcpy(perm_bytes.data(), perm.data(), perm_bytes.size());
    const int32_t key = rotation_of(op);
    const int idx =
        out_.weight(fmt::format("rope_perm_{}_{}", d, half), {d}, QnnType::i32(), perm_bytes);
    const std::vector<uint32_t> heads = {w, h, d};
    int x = ftemp(n, heads), xs = ftemp(n, heads), xc = ftemp(n, heads), xsn = ftemp(n, heads);
    int y = ftemp(n, heads);
    out_.node(n + "_heads", "Reshape", {f16_operand(op.inputs[0], n)}, {x});
    out_.node(n + "_swap", "Gather", {x, idx}, {xs}, {QnnParam::i32("axis", 2)});
    out_.node(n + "_cos", "ElementWiseMultiply", {x, extra(HtpIoRole::RopeCos, key)}, {xc});
    out_.node(n + "_sin", "ElementWiseMultiply", {xs, extra(HtpIoRole::RopeSin, key)}, {xsn});
    out_.node(n + "_sum", "ElementWiseAdd", {xc, xsn}, {y});
    f16_result(op, y, n);
  }

  // Full attention over the graph's W rows, per head: [W, H*D] -> [H, W, D]; softmax(beta =
  // scale) of q k^T; times v; back to [W, H*D].
  void lower_self_attention(const Op& op, const std::string& n) {
    const AttentionAttrs at = op.attention();
    const uint32_t w = uint32_t(g_.width), h = uint32_t(at.n_heads), d = uint32_t(at.head_dim);
    int heads[3];
    for (int j = 0; j < 3; ++j) {
      int x = ftemp(n, {w, h, d});
      out_.node(n + "_in" + std::to_string(j), "Reshape", {f16_operand(op.inputs[size_t(j)], n)},
                {x});
      heads[j] = ftemp(n, {h, w, d});
      out_.node(n + "_T" + std::to_string(j), "Transpose", {x}, {heads[j]},
                {QnnParam::u32_tensor("perm", {3}, {1, 0, 2})});
    }
    int scores = ftemp(n, {h, w, w}), probs = ftemp(n, {h, w, w});
    out_.node(
        n + "_qk", "MatMul", {heads[0], heads[1]}, {scores},
        {QnnParam::boolean("transpose_in0", false), QnnParam::boolean("transpose_in1", true)});
    out_.node(n + "_softmax", "Softmax", {scores}, {probs},
              {QnnParam::u32("axis", 2), QnnParam::f32("beta", at.scale)});
    int o = ftemp(n, {h, w, d}), ot = ftemp(n, {w, h, d});
    out_.node(
        n + "_pv", "MatMul", {probs, heads[2]}, {o},
        {QnnParam::boolean("transpose_in0", false), QnnParam::boolean("transpose_in1", false)});
    out_.node(n + "_oT", "Transpose", {o}, {ot}, {QnnParam::u32_tensor("perm", {3}, {1, 0, 2})});
    f16_result(op, ot, n);
  }

  // Causal attention over [the cache's C slots | the chunk's W rows], GQA as one batched
  // MatMul per KV head: q [W, H*D] -> [KVH, G*W, D]; scores [KVH, G*W, C+W] + mask; softmax
  // with beta = the scale; times [V past | V new] -> [W, H*D]. The chunk's keys and values
  // leave the graph as KNew / VNew ([KVH, W, D]) for the runtime to store.
  void lower_attention(const Op& op, const std::string& n) {
    const AttentionAttrs at = op.attention();
    const int32_t i = cur_;
    const uint32_t w = uint32_t(g_.width), d = uint32_t(at.head_dim);
    const uint32_t kvh = uint32_t(at.n_kv_heads), grp = uint32_t(at.n_heads / at.n_kv_heads);
    const uint32_t c = uint32_t(s_.context), t = c + w;
    auto reshape = [&](int src, std::vector<uint32_t> dims, const char* what) {
      int y = ftemp(n, std::move(dims));
      out_.node(n + what, "Reshape", {src}, {y});
      return y;
    };
    auto transpose = [&](int src, std::vector<uint32_t> dims, std::vector<uint32_t> perm,
                         const char* what, int into = -1) {
      int y = into >= 0 ? into : ftemp(n, std::move(dims));
      const uint32_t r = uint32_t(perm.size());
      out_.node(n + what, "Transpose", {src}, {y}, {QnnParam::u32_tensor("perm", {r}, perm)});
      return y;
    };
    // q: [W, KVH, G, D] -> [KVH, G, W, D] -> [KVH, G*W, D]
    int q = reshape(f16_operand(op.inputs[0], n), {w, kvh, grp, d}, "_q4");
    q = transpose(q, {kvh, grp, w, d}, {1, 2, 0, 3}, "_qT");
    q = reshape(q, {kvh, grp * w, d}, "_q3");
    // k, v: [W, KVH, D] -> [KVH, W, D] (the KNew / VNew outputs), after the cache's C slots.
    int kv_all[2];
    const HtpIoRole past[2] = {HtpIoRole::KPast, HtpIoRole::VPast};
    const HtpIoRole fresh[2] = {HtpIoRole::KNew, HtpIoRole::VNew};
    for (int j = 0; j < 2; ++j) {
      int x = reshape(f16_operand(op.inputs[size_t(1 + j)], n), {w, kvh, d}, j ? "_v3" : "_k3");
      int xt = transpose(x, {}, {1, 0, 2}, j ? "_vT" : "_kT", extra(fresh[j], i));
      kv_all[j] = ftemp(n, {kvh, t, d});
      out_.node(n + (j ? "_vcat" : "_kcat"), "Concat", {extra(past[j], i), xt}, {kv_all[j]},
                {QnnParam::u32("axis", 1)});
    }
    int scores = ftemp(n, {kvh, grp * w, t});
    out_.node(
        n + "_qk", "MatMul", {q, kv_all[0]}, {scores},
        {QnnParam::boolean("transpose_in0", false), QnnParam::boolean("transpose_in1", true)});
    int masked = ftemp(n, {kvh * grp, w, t});
    out_.node(n + "_mask", "ElementWiseAdd",
              {reshape(scores, {kvh * grp, w, t}, "_s3"), extra(HtpIoRole::Mask, -1)}, {masked});
    int probs = ftemp(n, {kvh * grp, w, t});
    out_.node(n + "_softmax", "Softmax", {masked}, {probs},
              {QnnParam::u32("axis", 2), QnnParam::f32("beta", at.scale)});
    int o = ftemp(n, {kvh, grp * w, d});
    out_.node(
        n + "_pv", "MatMul", {reshape(probs, {kvh, grp * w, t}, "_p3"), kv_all[1]}, {o},
        {QnnParam::boolean("transpose_in0", false), QnnParam::boolean("transpose_in1", false)});
    // [KVH, G, W, D] -> [W, KVH, G, D] -> [W, H*D]
    o = transpose(reshape(o, {kvh, grp, w, d}, "_o4"), {w, kvh, grp, d}, {2, 0, 1, 3}, "_oT");
    f16_result(op, o, n);
  }

  const Graph& g_;
  const HtpSegment& s_;
  HtpGraph& out_;
  const WeightFn& weight_;
  const WeightShapeFn& weight_shape_;
  HtpPrecision p_;
  std::map<int32_t, int> ids_;                    // value id -> QNN tensor (its latest version)
  std::map<std::pair<int, int32_t>, int> extra_;  // (role, index) -> QNN tensor
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

bool htp_supports(const Graph& g, const Op& op, const HtpCaps& caps) {
  switch (op.type) {
    case OpType::RmsNorm:
    case OpType::LayerNorm:
    case OpType::MatMul:
    case OpType::SiluMul:
    case OpType::Add:
    case OpType::GeluErf: break;
    // RoPE goes with the attention it feeds: its rows' positions are graph inputs then.
    case OpType::Rope:
    case OpType::Attention:
      if (!caps.attention) return false;
      break;
    case OpType::SelfAttention:
      if (!caps.self_attention || op.attention().n_kv_heads != op.attention().n_heads) return false;
      break;
    default: return false;  // PixelShuffle, PatchIm2col, GeluTanh, the Gated DeltaNet ops
  }
  // Values the CPU hands over as bf16 tile blocks are in a layout only its kernels read.
  auto blocks = [&](int32_t id) { return id >= 0 && g.values[size_t(id)].bf16_blocks; };
  if (blocks(op.output)) return false;
  for (int32_t id : op.inputs)
    if (blocks(id)) return false;
  return true;
}

std::vector<HtpSegment> htp_partition(const Graph& g, int min_ops, const HtpCaps& caps,
                                      int32_t context) {
  std::vector<HtpSegment> segs;
  const int32_t n = int32_t(g.ops.size());
  for (int32_t i = 0; i < n;) {
    if (!htp_supports(g, g.ops[size_t(i)], caps)) {
      ++i;
      continue;
    }
    int32_t j = i;
    while (j < n && htp_supports(g, g.ops[size_t(j)], caps) &&
           !(caps.split_layers && g.ops[size_t(j)].layer != g.ops[size_t(i)].layer))
      ++j;
    // A matmul alone is worth a call (the LM head); shorter elementwise runs are not.
    bool has_matmul = false;
    for (int32_t k = i; k < j; ++k) has_matmul |= g.ops[size_t(k)].type == OpType::MatMul;
    if (j - i >= min_ops || has_matmul) segs.push_back({i, j, {}, {}, {}, {}, {}, 0});
    i = j;
  }
  // Boundary values: read inside before written inside (inputs); written inside and read after,
  // or the graph's result (outputs), in the order of their last writer (the lowering creates
  // an output tensor there).
  for (size_t k = 0; k < segs.size(); ++k) {
    HtpSegment& s = segs[k];
    s.name = g.name + "_seg" + std::to_string(k);
    std::map<int32_t, int32_t> last_writer;
    for (int32_t i = s.first_op; i < s.end_op; ++i) {
      const Op& op = g.ops[size_t(i)];
      for (int32_t id : op.inputs)
        if (is_activation(g, id) && !last_writer.count(id) &&
            std::find(s.inputs.begin(), s.inputs.end(), id) == s.inputs.end())
          s.inputs.push_back(id);
      last_writer[op.output] = i;
    }
    std::vector<std::pair<int32_t, int32_t>> outs;  // (last writer, value)
    for (const auto& [id, writer] : last_writer) {
      bool read_after = id == g.output;
      for (int32_t i = s.end_op; i < n && !read_after; ++i)
        for (int32_t r : g.ops[size_t(i)].inputs) read_after |= r == id;
      if (read_after) outs.push_back({writer, id});
    }
    std::sort(outs.begin(), outs.end());
    for (const auto& o : outs) s.outputs.push_back(o.second);
    // The runtime's state: a cos / sin pair per rotation, one mask, each attention's caches.
    bool attention = false;
    for (int32_t i = s.first_op; i < s.end_op; ++i) {
      const Op& op = g.ops[size_t(i)];
      if (op.type == OpType::Rope) {
        bool seen = false;
        for (int32_t j = s.first_op; j < i && !seen; ++j)
          seen = g.ops[size_t(j)].type == OpType::Rope && same_rotation(g.ops[size_t(j)], op);
        if (!seen) {
          s.extra_inputs.push_back({HtpIoRole::RopeCos, i});
          s.extra_inputs.push_back({HtpIoRole::RopeSin, i});
        }
      } else if (op.type == OpType::Attention) {
        attention = true;
        s.extra_inputs.push_back({HtpIoRole::KPast, i});
        s.extra_inputs.push_back({HtpIoRole::VPast, i});
        s.extra_outputs.push_back({HtpIoRole::KNew, i});
        s.extra_outputs.push_back({HtpIoRole::VNew, i});
      }
    }
    if (attention) {
      check(context > 0, "internal: HTP attention without a context length");
      s.extra_inputs.push_back({HtpIoRole::Mask, -1});
      s.context = context;
    }
  }
  return segs;
}

std::vector<uint32_t> htp_io_dims(const Graph& g, const HtpSegment& s, const HtpIo& io) {
  const uint32_t w = uint32_t(g.width), c = uint32_t(s.context);
  const Op* op =
      io.index >= 0 && io.index < int32_t(g.ops.size()) ? &g.ops[size_t(io.index)] : nullptr;
  switch (io.role) {
    case HtpIoRole::RopeCos:
    case HtpIoRole::RopeSin:
      check(op && op->type == OpType::Rope, "HTP: {} of op {} is not a Rope's", role_name(io.role),
            io.index);
      return {w, 1, uint32_t(op->rope().head_dim)};
    case HtpIoRole::Mask: return {w, c + w};
    case HtpIoRole::KPast:
    case HtpIoRole::VPast:
    case HtpIoRole::KNew:
    case HtpIoRole::VNew: {
      check(op && op->type == OpType::Attention, "HTP: {} of op {} is not an Attention's",
            role_name(io.role), io.index);
      const AttentionAttrs a = op->attention();
      const bool past = io.role == HtpIoRole::KPast || io.role == HtpIoRole::VPast;
      return {uint32_t(a.n_kv_heads), past ? c : w, uint32_t(a.head_dim)};
    }
    default: fail("HTP: value {} is not an extra input", io.index);
  }
}

void lower_segment(const Graph& g, const HtpSegment& s, HtpGraph& out, const WeightFn& weight,
                   const WeightShapeFn& weight_shape, const HtpPrecision& p) {
  Lowering(g, s, out, weight, weight_shape, p).run();
}

}  // namespace edgevl::qnn
