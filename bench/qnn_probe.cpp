// What the QNN HTP library on this machine accepts and how its simulator runs it: for each op
// kind edgevl's graphs need and each data type, a one-op graph is validated, finalized for a
// target and executed, and its output compared with a float reference. Then each target
// finalizes a small graph, and layer-shaped graphs report their simulated cycles.
//   build/bench/qnn_probe [--target htp-v75] [--matmuls]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/qnn/htp_graph.h"
#include "backend/qnn/qnn_library.h"
#include "core/dtype.h"
#include "core/error.h"

using namespace edgevl;
using namespace edgevl::qnn;

namespace {

using Dims = std::vector<uint32_t>;
size_t count(const Dims& d) {
  size_t n = 1;
  for (uint32_t x : d) n *= x;
  return n;
}

// How a case's tensors are typed.
enum class Mode { F32, F16, A8W8, A16W8, A16W4 };
const char* mode_name(Mode m) {
  switch (m) {
    case Mode::F32: return "f32";
    case Mode::F16: return "f16";
    case Mode::A8W8: return "a8w8";
    case Mode::A16W8: return "a16w8";
    case Mode::A16W4: return "a16w4";
  }
  return "?";
}

struct Tensor {
  Dims dims;
  std::vector<float> v;
};

// One op under test: its inputs (data from the app), its constants (weights) and how its float
// output is computed.
struct Case {
  std::string op;
  std::vector<Tensor> inputs, constants;
  bool constants_are_weights = true;  // quantized with the weight type (else with the act type)
  bool int_index_input = false;       // input 1 is an int32 index (Gather)
  bool symmetric_second = false;      // a16: HTP wants the second matmul operand centred
  bool output_like_table = false;     // Gather's output keeps the table's encoding
  Dims out_dims;
  std::vector<QnnParam> params;
  std::function<std::vector<float>(const Case&)> reference;
  std::vector<int> order;  // operand order: >=0 input i, <0 constant -(i+1)
};
Case make(std::string op, std::vector<Tensor> inputs, std::vector<Tensor> constants) {
  Case c;
  c.op = std::move(op);
  c.inputs = std::move(inputs);
  c.constants = std::move(constants);
  return c;
}

std::mt19937 rng(7);
Tensor random(Dims d, float scale = 1.f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  Tensor t{d, std::vector<float>(count(d))};
  for (float& x : t.v) x = u(rng);
  return t;
}

// Asymmetric encoding of [lo, hi] on `levels` steps: value = scale * (q + offset).
QnnType encoding(api::DataType t, float lo, float hi, int levels) {
  lo = std::min(lo, 0.f);
  hi = std::max(hi, 0.f);
  float scale = std::max(hi - lo, 1e-6f) / float(levels - 1);
  return QnnType::quant(t, scale, int32_t(std::lround(lo / scale)));
}
QnnType encoding_of(const std::vector<float>& v, api::DataType t, int levels) {
  float lo = 0, hi = 0;
  for (float x : v) lo = std::min(lo, x), hi = std::max(hi, x);
  return encoding(t, lo, hi, levels);
}
// Symmetric per-channel (axis = last dim of the weight as QNN lays it out) is what HTP wants for
// weights; per tensor keeps the probe simple and valid for every op.
float absmax(const std::vector<float>& v) {
  float a = 1e-6f;
  for (float x : v) a = std::max(a, std::fabs(x));
  return a;
}
QnnType weight_encoding(const std::vector<float>& v, Mode m) {
  if (m == Mode::A16W4) return QnnType::quant(api::kSFixed8, absmax(v) / 7.f, 0, 4);
  return QnnType::quant(api::kSFixed8, absmax(v) / 127.f, 0);
}
// Norm weights and other small parameters: symmetric in the activation type (HTP requires the
// 16-bit ones to be centred: offset -32768).
QnnType symmetric_encoding(const std::vector<float>& v, api::DataType t) {
  if (t == api::kUFixed8) return QnnType::quant(t, absmax(v) / 127.f, -128);
  return QnnType::quant(t, absmax(v) / 32767.f, -32768);
}

std::vector<uint8_t> encode(const std::vector<float>& v, const QnnType& t) {
  std::vector<uint8_t> out(v.size() * t.element_bytes());
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.type) {
      case api::kFloat32: std::memcpy(&out[i * 4], &v[i], 4); break;
      case api::kFloat16: {
        uint16_t h = f32_to_f16(v[i]);
        std::memcpy(&out[i * 2], &h, 2);
        break;
      }
      case api::kUFixed8:
      case api::kUFixed16:
      case api::kSFixed8:
      case api::kSFixed32: {
        long q = std::lround(v[i] / t.scales[0]) - t.offsets[0];
        if (t.type == api::kUFixed8)
          out[i] = uint8_t(std::clamp(q, 0L, 255L));
        else if (t.type == api::kSFixed8 && t.bitwidth == 4)
          out[i] = uint8_t(int8_t(std::clamp(q, -7L, 7L)));
        else if (t.type == api::kSFixed8)
          out[i] = uint8_t(int8_t(std::clamp(q, -127L, 127L)));
        else if (t.type == api::kSFixed32) {
          int32_t k = int32_t(q);
          std::memcpy(&out[i * 4], &k, 4);
        } else {
          uint16_t u = uint16_t(std::clamp(q, 0L, 65535L));
          std::memcpy(&out[i * 2], &u, 2);
        }
        break;
      }
      default: fail("probe: cannot encode type {:#x}", uint32_t(t.type));
    }
  }
  return out;
}
std::vector<float> decode(const std::vector<uint8_t>& b, const QnnType& t, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    switch (t.type) {
      case api::kFloat32: std::memcpy(&v[i], &b[i * 4], 4); break;
      case api::kFloat16: {
        uint16_t h;
        std::memcpy(&h, &b[i * 2], 2);
        v[i] = f16_to_f32(h);
        break;
      }
      case api::kUFixed8: v[i] = t.scales[0] * (float(b[i]) + float(t.offsets[0])); break;
      case api::kUFixed16: {
        uint16_t u;
        std::memcpy(&u, &b[i * 2], 2);
        v[i] = t.scales[0] * (float(u) + float(t.offsets[0]));
        break;
      }
      default: fail("probe: cannot decode type {:#x}", uint32_t(t.type));
    }
  }
  return v;
}

struct Result {
  std::string status;  // "ok" or the failing stage
  double rel_err = 0;
  uint64_t cycles = 0;
};

Result run_case(const Case& c, Mode m, const HtpTarget& target) {
  Result r;
  const bool quant = m == Mode::A8W8 || m == Mode::A16W8 || m == Mode::A16W4;
  const api::DataType act = m == Mode::A8W8 ? api::kUFixed8 : api::kUFixed16;
  const int levels = m == Mode::A8W8 ? 256 : 65536;
  std::vector<float> ref = c.reference(c);
  auto type_for = [&](const std::vector<float>& v, bool weight) {
    if (m == Mode::F32) return QnnType::f32();
    if (m == Mode::F16) return QnnType::f16();
    if (weight) return weight_encoding(v, m);
    return encoding_of(v, act, levels);
  };
  try {
    HtpContext ctx(target);
    HtpGraph& g = ctx.graph("probe", m != Mode::F32);
    std::vector<int> in_ids, const_ids;
    std::vector<QnnType> in_types;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (c.int_index_input && i == 1) {
        in_types.push_back(QnnType::i32());
      } else if (quant && c.symmetric_second && i == 1 && act == api::kUFixed16) {
        in_types.push_back(symmetric_encoding(c.inputs[i].v, act));
      } else {
        in_types.push_back(type_for(c.inputs[i].v, false));
      }
      in_ids.push_back(g.input("in" + std::to_string(i), c.inputs[i].dims, in_types.back()));
    }
    QnnType weight_t;
    for (size_t i = 0; i < c.constants.size(); ++i) {
      const Tensor& k = c.constants[i];
      QnnType t = type_for(k.v, c.constants_are_weights);
      if (i == 0) weight_t = t;
      if (quant && k.dims.size() == 1) {
        // A bias is int32 at scale input x weight (what the matmul accumulates in); a norm's
        // gamma and beta are symmetric in the activation type.
        t = c.constants_are_weights
                ? QnnType::quant(api::kSFixed32, in_types[0].scales[0] * weight_t.scales[0], 0)
                : symmetric_encoding(k.v, act);
      }
      std::vector<uint8_t> bytes = encode(k.v, t);
      const_ids.push_back(g.constant("k" + std::to_string(i), k.dims, t, bytes));
    }
    QnnType out_t = c.output_like_table && quant ? encoding_of(c.constants[0].v, act, levels)
                                                 : type_for(ref, false);
    int out = g.output("out", c.out_dims, out_t);
    std::vector<int> operands;
    for (int o : c.order)
      operands.push_back(o >= 0 ? in_ids[size_t(o)] : const_ids[size_t(-o - 1)]);
    r.status = "validate";
    g.node("op", c.op, operands, {out}, c.params);
    r.status = "finalize";
    g.finalize();
    r.status = "execute";
    std::vector<std::vector<uint8_t>> in_bytes;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (c.int_index_input && i == 1) {
        std::vector<uint8_t> b(c.inputs[i].v.size() * 4);
        for (size_t j = 0; j < c.inputs[i].v.size(); ++j) {
          int32_t k = int32_t(c.inputs[i].v[j]);
          std::memcpy(&b[j * 4], &k, 4);
        }
        in_bytes.push_back(b);
      } else {
        in_bytes.push_back(encode(c.inputs[i].v, in_types[i]));
      }
    }
    std::vector<uint8_t> out_bytes(count(c.out_dims) * out_t.element_bytes());
    std::vector<std::span<const uint8_t>> ins(in_bytes.begin(), in_bytes.end());
    std::vector<std::span<uint8_t>> outs = {out_bytes};
    HtpRunStats st = g.execute(ins, outs);
    std::vector<float> got = decode(out_bytes, out_t, count(c.out_dims));
    double maxref = 1e-9, maxerr = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      maxref = std::max(maxref, double(std::fabs(ref[i])));
      maxerr = std::max(maxerr, double(std::fabs(ref[i] - got[i])));
    }
    r.rel_err = maxerr / maxref;
    r.cycles = st.accel_cycles;
    r.status = "ok";
  } catch (const Error& e) {
    std::string msg = e.what();
    size_t code = msg.find("QNN error ");
    r.status += code == std::string::npos ? " failed" : " " + msg.substr(code + 10, 4);
    if (std::getenv("EDGEVL_QNN_PROBE_VERBOSE"))
      fprintf(stderr, "%s/%s: %s\n", c.op.c_str(), mode_name(m), msg.c_str());
  }
  return r;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  const uint32_t M = 8, K = 64, N = 32;
  {  // FullyConnected: x [M,K] · W[N,K]^T + b
    Case c = make("FullyConnected", {random({M, K})}, {random({N, K}, 0.2f), random({N}, 0.1f)});
    c.out_dims = {M, N};
    c.order = {0, -1, -2};
    c.reference = [=](const Case& c) {
      std::vector<float> y(M * N);
      for (uint32_t i = 0; i < M; ++i)
        for (uint32_t j = 0; j < N; ++j) {
          double s = c.constants[1].v[j];
          for (uint32_t k = 0; k < K; ++k)
            s += c.inputs[0].v[i * K + k] * c.constants[0].v[j * K + k];
          y[i * N + j] = float(s);
        }
      return y;
    };
    all.push_back(c);
  }
  {  // MatMul of two activations (attention's QK^T): a [1,M,K] · b[1,N,K]^T
    Case c = make("MatMul", {random({1, M, K}), random({1, N, K})}, {});
    c.out_dims = {1, M, N};
    c.order = {0, 1};
    c.params = {QnnParam::boolean("transpose_in0", false),
                QnnParam::boolean("transpose_in1", true)};
    c.symmetric_second = true;
    c.reference = [=](const Case& c) {
      std::vector<float> y(M * N);
      for (uint32_t i = 0; i < M; ++i)
        for (uint32_t j = 0; j < N; ++j) {
          double s = 0;
          for (uint32_t k = 0; k < K; ++k) s += c.inputs[0].v[i * K + k] * c.inputs[1].v[j * K + k];
          y[i * N + j] = float(s);
        }
      return y;
    };
    all.push_back(c);
  }
  {  // Conv2d NHWC, weights [kh, kw, cin, cout], stride 2 (a ViT patch embedding in small)
    const uint32_t H = 8, C = 16, O = 32, P = 2;
    Case c =
        make("Conv2d", {random({1, H, H, C})}, {random({P, P, C, O}, 0.2f), random({O}, 0.1f)});
    c.out_dims = {1, H / P, H / P, O};
    c.order = {0, -1, -2};
    c.params = {QnnParam::u32_tensor("stride", {2}, {P, P}),
                QnnParam::u32_tensor("pad_amount", {2, 2}, {0, 0, 0, 0})};
    c.reference = [=](const Case& c) {
      std::vector<float> y(count(c.out_dims));
      for (uint32_t oy = 0; oy < H / P; ++oy)
        for (uint32_t ox = 0; ox < H / P; ++ox)
          for (uint32_t o = 0; o < O; ++o) {
            double s = c.constants[1].v[o];
            for (uint32_t ky = 0; ky < P; ++ky)
              for (uint32_t kx = 0; kx < P; ++kx)
                for (uint32_t ci = 0; ci < C; ++ci)
                  s += c.inputs[0].v[((oy * P + ky) * H + ox * P + kx) * C + ci] *
                       c.constants[0].v[((ky * P + kx) * C + ci) * O + o];
            y[(oy * (H / P) + ox) * O + o] = float(s);
          }
      return y;
    };
    all.push_back(c);
  }
  auto norm_case = [&](const std::string& op, bool rms) {
    // edgevl's RMSNorm has no beta: the probe gives it none (given one, the float graphs leave
    // it out of the sum while the quantized ones add it).
    Case c = make(op, {random({M, K}, 2.f)}, {random({K}, 1.f)});
    if (!rms) c.constants.push_back(random({K}, 0.5f));
    c.constants_are_weights = false;
    c.out_dims = {M, K};
    c.order = rms ? std::vector<int>{0, -1} : std::vector<int>{0, -1, -2};
    c.params = {QnnParam::f32("epsilon", 1e-6f), QnnParam::u32_tensor("axes", {1}, {1})};
    c.reference = [=](const Case& c) {
      std::vector<float> y(M * K);
      for (uint32_t i = 0; i < M; ++i) {
        double mean = 0, var = 0;
        for (uint32_t k = 0; k < K; ++k) mean += c.inputs[0].v[i * K + k];
        mean = rms ? 0 : mean / K;
        for (uint32_t k = 0; k < K; ++k) var += std::pow(c.inputs[0].v[i * K + k] - mean, 2);
        double inv = 1 / std::sqrt(var / K + 1e-6);
        for (uint32_t k = 0; k < K; ++k)
          y[i * K + k] = float((c.inputs[0].v[i * K + k] - mean) * inv * c.constants[0].v[k] +
                               (rms ? 0.f : c.constants[1].v[k]));
      }
      return y;
    };
    return c;
  };
  all.push_back(norm_case("LayerNorm", false));
  all.push_back(norm_case("RmsNorm", true));
  auto unary = [&](const std::string& op, std::function<float(float)> f,
                   std::vector<QnnParam> params = {}) {
    Case c = make(op, {random({M, K}, 3.f)}, {});
    c.out_dims = {M, K};
    c.order = {0};
    c.params = params;
    c.reference = [=](const Case& c) {
      std::vector<float> y(c.inputs[0].v.size());
      for (size_t i = 0; i < y.size(); ++i) y[i] = f(c.inputs[0].v[i]);
      return y;
    };
    return c;
  };
  all.push_back(
      unary("Gelu", [](float x) { return 0.5f * x * (1 + std::erf(x / std::sqrt(2.f))); }));
  all.push_back(unary("Sigmoid", [](float x) { return 1 / (1 + std::exp(-x)); }));
  {
    Case c = unary("Softmax", nullptr, {QnnParam::u32("axis", 1), QnnParam::f32("beta", 1.f)});
    c.reference = [=](const Case& c) {
      std::vector<float> y(M * K);
      for (uint32_t i = 0; i < M; ++i) {
        float mx = -1e30f;
        for (uint32_t k = 0; k < K; ++k) mx = std::max(mx, c.inputs[0].v[i * K + k]);
        double s = 0;
        for (uint32_t k = 0; k < K; ++k) s += std::exp(c.inputs[0].v[i * K + k] - mx);
        for (uint32_t k = 0; k < K; ++k)
          y[i * K + k] = float(std::exp(c.inputs[0].v[i * K + k] - mx) / s);
      }
      return y;
    };
    all.push_back(c);
  }
  auto binary = [&](const std::string& op, std::function<float(float, float)> f) {
    Case c = make(op, {random({M, K}, 2.f), random({M, K}, 2.f)}, {});
    c.out_dims = {M, K};
    c.order = {0, 1};
    c.reference = [=](const Case& c) {
      std::vector<float> y(M * K);
      for (size_t i = 0; i < y.size(); ++i) y[i] = f(c.inputs[0].v[i], c.inputs[1].v[i]);
      return y;
    };
    return c;
  };
  all.push_back(binary("ElementWiseAdd", [](float a, float b) { return a + b; }));
  all.push_back(binary("ElementWiseMultiply", [](float a, float b) { return a * b; }));
  {
    Case c = unary("Transpose", nullptr, {QnnParam::u32_tensor("perm", {2}, {1, 0})});
    c.out_dims = {K, M};
    c.reference = [=](const Case& c) {
      std::vector<float> y(M * K);
      for (uint32_t i = 0; i < M; ++i)
        for (uint32_t k = 0; k < K; ++k) y[k * M + i] = c.inputs[0].v[i * K + k];
      return y;
    };
    all.push_back(c);
  }
  {
    Case c = unary("Reshape", [](float x) { return x; });
    c.out_dims = {M * 2, K / 2};
    all.push_back(c);
  }
  {  // Gather rows of a table (the token embedding): table [V,K] static, indices [M] int32
    const uint32_t V = 100;
    Case c = make("Gather", {}, {random({V, K})});
    Tensor idx{{M}, {}};
    for (uint32_t i = 0; i < M; ++i) idx.v.push_back(float((i * 37) % V));
    c.inputs = {Tensor{{1}, {0.f}}, idx};
    c.int_index_input = true;
    c.output_like_table = true;
    c.constants_are_weights = false;
    c.out_dims = {M, K};
    c.order = {-1, 1};
    c.params = {QnnParam::i32("axis", 0)};
    c.reference = [=](const Case& c) {
      std::vector<float> y(M * K);
      for (uint32_t i = 0; i < M; ++i)
        for (uint32_t k = 0; k < K; ++k)
          y[i * K + k] = c.constants[0].v[uint32_t(c.inputs[1].v[i]) * K + k];
      return y;
    };
    all.push_back(c);
  }
  return all;
}

// One FullyConnected [M,K]x[N,K]^T at a real projection's shape: the simulator's cycles and
// its wall time here, for fp16 and for 16-bit activations with 8-bit weights.
void matmul_study(const HtpTarget& target) {
  struct Shape {
    const char* what;
    uint32_t M, K, N;
  };
  const Shape shapes[] = {{"qwen2-0.5b mlp up, decode", 1, 896, 4864},
                          {"qwen2-0.5b mlp up, 128 rows", 128, 896, 4864},
                          {"internvit-300m fc1, 1025 rows", 1025, 1024, 4096},
                          {"qwen2-0.5b lm head, decode", 1, 896, 151936}};
  printf(
      "\nFullyConnected on %s: simulated cycles (and wall time of the simulation here)\n\n"
      "| shape | MACs | f16 cycles | f16 MAC/cycle | a16w8 cycles | a16w8 MAC/cycle | "
      "simulation wall ms (f16, a16w8) |\n|---|---|---|---|---|---|---|\n",
      target.name().c_str());
  for (const Shape& sh : shapes) {
    const double macs = double(sh.M) * sh.K * sh.N;
    printf("| %s [%u,%u]x[%u,%u]^T | %.3g |", sh.what, sh.M, sh.K, sh.N, sh.K, macs);
    double wall[2] = {0, 0};
    for (int quant = 0; quant < 2; ++quant) {
      try {
        HtpContext ctx(target);
        HtpGraph& g = ctx.graph("mm", true);
        QnnType act = quant ? QnnType::quant(api::kUFixed16, 1.f / 32768, -32768) : QnnType::f16();
        QnnType wt = quant ? QnnType::quant(api::kSFixed8, 1.f / 512, 0) : QnnType::f16();
        // Random weights and inputs (values in [-1, 1) in f16; any byte in int8): the
        // simulator's cycles depend on the data, and zeros understate them.
        std::mt19937 bits(11);
        auto fill = [&](std::vector<uint8_t>& v, bool f16) {
          std::uniform_real_distribution<float> u(-1.f, 1.f);
          if (!f16) {
            for (uint8_t& b : v) b = uint8_t(bits());
            return;
          }
          for (size_t i = 0; i + 1 < v.size(); i += 2) {
            const uint16_t h = f32_to_f16(u(bits));
            std::memcpy(&v[i], &h, 2);
          }
        };
        std::vector<uint8_t> w(size_t(sh.N) * sh.K * (quant ? 1 : 2));
        fill(w, !quant);
        int x = g.input("x", {sh.M, sh.K}, act);
        int k = g.constant("w", {sh.N, sh.K}, wt, w);
        int y = g.output("y", {sh.M, sh.N}, act);
        g.node("fc", "FullyConnected", {x, k}, {y});
        g.finalize();
        std::vector<uint8_t> in(size_t(sh.M) * sh.K * 2), out(size_t(sh.M) * sh.N * 2);
        fill(in, !quant);
        std::vector<std::span<const uint8_t>> ins = {in};
        std::vector<std::span<uint8_t>> outs = {out};
        HtpRunStats st = g.execute(ins, outs);
        wall[quant] = st.host_ms;
        printf(" %llu | %.0f |", (unsigned long long)st.accel_cycles,
               st.accel_cycles ? macs / double(st.accel_cycles) : 0.0);
      } catch (const Error& e) {
        printf(" failed | - |");
        if (std::getenv("EDGEVL_QNN_PROBE_VERBOSE")) fprintf(stderr, "%s\n", e.what());
      }
      fflush(stdout);
    }
    printf(" %.0f, %.0f |\n", wall[0], wall[1]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string target_name = "htp-v75";
  bool matmuls = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--target" && i + 1 < argc) target_name = argv[++i];
    if (std::string(argv[i]) == "--matmuls") matmuls = true;
  }
  try {
    const QnnLibrary& lib = QnnLibrary::get();
    printf("QNN library: %s\nprovider %s, core API %u.%u.%u, backend API %u.%u.%u\n\n",
           lib.dir().c_str(), lib.provider().c_str(), lib.version().core.major,
           lib.version().core.minor, lib.version().core.patch, lib.version().backend.major,
           lib.version().backend.minor, lib.version().backend.patch);
    const HtpTarget target = HtpTarget::parse(target_name);
    std::vector<Mode> modes = {Mode::F32, Mode::F16, Mode::A8W8, Mode::A16W8, Mode::A16W4};
    printf(
        "ops x types on %s (one-op graphs; cell: max |err| / max |ref|, or the stage that "
        "failed with its QNN error code)\n\n| op |",
        target.name().c_str());
    for (Mode m : modes) printf(" %s |", mode_name(m));
    printf("\n|---|");
    for (size_t i = 0; i < modes.size(); ++i) printf("---|");
    printf("\n");
    for (Case& c : cases()) {
      printf("| %s |", c.op.c_str());
      for (Mode m : modes) {
        Result r = run_case(c, m, target);
        if (r.status == "ok")
          printf(" %.1e |", r.rel_err);
        else
          printf(" %s |", r.status.c_str());
        fflush(stdout);
      }
      printf("\n");
    }
    if (matmuls) matmul_study(target);
  } catch (const Error& e) {
    fprintf(stderr, "qnn_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
