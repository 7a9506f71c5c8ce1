#include "compiler/vision_model.h"

#include <cmath>

#include "graph/graph_builder.h"
#include "core/error.h"
#include "format/safetensors.h"
#include "models/internvit.h"

namespace edgevl::compiler {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

class Planner {
 public:
  Planner(const Checkpoint& c, VisionWeights& w) : ckpt_(c), w_(w) {}

  // The checkpoint tensor of a table entry, its size checked against the table's shape.
  const TensorView* get(const models::VisionTensor& v) {
    const TensorView* t = ckpt_.find(v.name);
    if (!t) {
      missing_.push_back(v.name);
      return nullptr;
    }
    w_.consumed.insert(v.name);
    int64_t want = 1;
    for (int64_t d : v.shape) want *= d;
    check(t->numel() == want, "{}: tensor '{}' has shape {} but the config implies {}",
          ckpt_.dir().string(), v.name, shape_str(t->shape), shape_str(v.shape));
    return t;
  }

  // Adds a tensor to the table; `make` fills it. Returns its table name.
  std::string add(const std::string& name, std::vector<int64_t> shape, WeightRole role,
                  std::function<void(float*)> make) {
    w_.specs.push_back({name, std::move(shape), role, std::move(make)});
    return name;
  }
  std::string direct(const models::VisionTensor& v, std::vector<int64_t> shape, WeightRole role) {
    const TensorView* t = get(v);
    if (!t) return v.name;
    return add(v.name, shape, role, [t](float* out) { tensor_to_f32(*t, out); });
  }
  // Rows [first, first + rows) of a [*, cols] tensor (the fused qkv split).
  std::string rows_of(const std::string& out_name, const models::VisionTensor& src, int64_t first,
                      int64_t rows, int64_t cols, WeightRole role) {
    const TensorView* t = get(src);
    if (!t) return out_name;
    std::vector<int64_t> shape =
        cols == 1 ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, cols};
    return add(out_name, shape, role, [t, first, rows, cols](float* out) {
      std::vector<float> all(size_t(t->numel()));
      tensor_to_f32(*t, all.data());
      std::copy(all.begin() + first * cols, all.begin() + (first + rows) * cols, out);
    });
  }
  // W[o][i] * scale[o] (and b[o] * scale[o]): a per-output-channel layer scale folded in.
  std::string scaled(const std::string& out_name, const models::VisionTensor& src,
                     const models::VisionTensor& scale, int64_t rows, int64_t cols,
                     WeightRole role) {
    const TensorView* t = get(src);
    const TensorView* s = get(scale);
    if (!t || !s) return out_name;
    std::vector<int64_t> shape =
        cols == 1 ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, cols};
    return add(out_name, shape, role, [t, s, rows, cols](float* out) {
      tensor_to_f32(*t, out);
      std::vector<float> sc(static_cast<size_t>(rows));
      tensor_to_f32(*s, sc.data());
      for (int64_t o = 0; o < rows; ++o)
        for (int64_t i = 0; i < cols; ++i) out[o * cols + i] *= sc[size_t(o)];
    });
  }

  void finish() {
    if (missing_.empty()) return;
    std::string list;
    for (size_t i = 0; i < missing_.size() && i < 12; ++i) list += (i ? ", " : "") + missing_[i];
    if (missing_.size() > 12) list += fmt::format(", ... ({} more)", missing_.size() - 12);
    fail("{}: {} vision tensor(s) missing: {}", ckpt_.dir().string(), missing_.size(), list);
  }

 private:
  const Checkpoint& ckpt_;
  VisionWeights& w_;
  std::vector<std::string> missing_;
};

}  // namespace

VisionWeights plan_vision_weights(const Checkpoint& ckpt, const models::VlmInfo& info) {
  const VisionConfig& v = info.vision;
  models::InternVitShape shape;
  shape.hidden = v.hidden;
  shape.layers = v.n_layers;  // layers past select_layer are not read (below)
  shape.ffn = v.ffn;
  shape.image = v.image_size;
  shape.patch = v.patch_size;
  shape.shuffle = v.shuffle;
  shape.qkv_bias = info.vision_qkv_bias;
  const models::InternVitTable n = models::internvit_table(info.naming, shape, v.llm_hidden);
  VisionWeights w;
  Planner p(ckpt, w);
  const int64_t D = v.hidden, P = 3 * int64_t(v.patch_size) * v.patch_size, G = v.grid();
  const int64_t T = 1 + G * G, F = v.ffn, S = int64_t(v.shuffle) * v.shuffle, L = v.llm_hidden;

  // Conv2d weight [D, 3, p, p] is already a [D, 3*p*p] matrix in the patch layout we feed.
  const TensorView* pw = p.get(n.patch_w);
  if (pw)
    w.patch_w = p.add("vision.patch_embed.weight", {D, P}, WeightRole::Linear,
                      [pw](float* out) { tensor_to_f32(*pw, out); });
  const TensorView* pb = p.get(n.patch_b);
  if (pb)
    w.patch_b = p.add("vision.patch_embed.bias", {D}, WeightRole::Bias,
                      [pb](float* out) { tensor_to_f32(*pb, out); });
  // Row 0 of the input is zero, so the matmul leaves the bias there: adding (cls - bias)
  // makes it the class embedding. Every row then gets its position embedding.
  const TensorView* cls = p.get(n.cls);
  const TensorView* pos = ckpt.find(n.pos.name);
  if (!pos) {
    p.get(n.pos);
  } else {
    w.consumed.insert(n.pos.name);
    check(pos->numel() == T * D,
          "{}: tensor '{}' has shape {} but a {}x{} patch grid needs [1, {}, {}] (position "
          "embeddings for another image size are not supported yet)",
          ckpt.dir().string(), n.pos.name, shape_str(pos->shape), G, G, T, D);
  }
  if (cls && pos && pb)
    w.embed_add =
        p.add("vision.embed_add", {T, D}, WeightRole::Constant, [cls, pos, pb, D](float* out) {
          tensor_to_f32(*pos, out);
          std::vector<float> c(static_cast<size_t>(D)), b(static_cast<size_t>(D));
          tensor_to_f32(*cls, c.data());
          tensor_to_f32(*pb, b.data());
          for (int64_t i = 0; i < D; ++i) out[i] += c[i] - b[i];
        });

  // Layers past select_layer are not run: their tensors are dropped on purpose.
  for (int l = v.n_layers; l < info.vision_layers; ++l) {
    const std::string prefix = models::internvit_layer_prefix(info.naming, l);
    for (const std::string& name : ckpt.names())
      if (name.rfind(prefix, 0) == 0) w.consumed.insert(name);
  }
  for (int l = 0; l < v.n_layers; ++l) {
    const models::InternVitTable::Layer& src = n.layers[size_t(l)];
    VisionWeights::Layer ly;
    const std::string dst = "vision.layers." + std::to_string(l) + ".";
    ly.n1w = p.direct(src.n1w, {D}, WeightRole::Norm);
    ly.n1b = p.direct(src.n1b, {D}, WeightRole::Bias);
    if (src.qkv_w.present()) {
      ly.wq = p.rows_of(dst + "q.weight", src.qkv_w, 0, D, D, WeightRole::Linear);
      ly.wk = p.rows_of(dst + "k.weight", src.qkv_w, D, D, D, WeightRole::Linear);
      ly.wv = p.rows_of(dst + "v.weight", src.qkv_w, 2 * D, D, D, WeightRole::Linear);
      if (src.qkv_b.present()) {
        ly.bq = p.rows_of(dst + "q.bias", src.qkv_b, 0, D, 1, WeightRole::Bias);
        ly.bk = p.rows_of(dst + "k.bias", src.qkv_b, D, D, 1, WeightRole::Bias);
        ly.bv = p.rows_of(dst + "v.bias", src.qkv_b, 2 * D, D, 1, WeightRole::Bias);
      }
    } else {
      ly.wq = p.direct(src.q_w, {D, D}, WeightRole::Linear);
      ly.wk = p.direct(src.k_w, {D, D}, WeightRole::Linear);
      ly.wv = p.direct(src.v_w, {D, D}, WeightRole::Linear);
      if (src.q_b.present()) {
        ly.bq = p.direct(src.q_b, {D}, WeightRole::Bias);
        ly.bk = p.direct(src.k_b, {D}, WeightRole::Bias);
        ly.bv = p.direct(src.v_b, {D}, WeightRole::Bias);
      }
    }
    ly.wo = p.scaled(dst + "attn_out.weight", src.o_w, src.ls1, D, D, WeightRole::Linear);
    ly.bo = p.scaled(dst + "attn_out.bias", src.o_b, src.ls1, D, 1, WeightRole::Bias);
    ly.n2w = p.direct(src.n2w, {D}, WeightRole::Norm);
    ly.n2b = p.direct(src.n2b, {D}, WeightRole::Bias);
    ly.fc1w = p.direct(src.fc1w, {F, D}, WeightRole::Linear);
    ly.fc1b = p.direct(src.fc1b, {F}, WeightRole::Bias);
    ly.fc2w = p.scaled(dst + "fc2.weight", src.fc2w, src.ls2, D, F, WeightRole::Linear);
    ly.fc2b = p.scaled(dst + "fc2.bias", src.fc2b, src.ls2, D, 1, WeightRole::Bias);
    w.layers.push_back(ly);
  }
  w.pn_w = p.direct(n.pn_w, {D * S}, WeightRole::Norm);
  w.pn_b = p.direct(n.pn_b, {D * S}, WeightRole::Bias);
  w.p1w = p.direct(n.p1w, {L, D * S}, WeightRole::Linear);
  w.p1b = p.direct(n.p1b, {L}, WeightRole::Bias);
  w.p2w = p.direct(n.p2w, {L, L}, WeightRole::Linear);
  w.p2b = p.direct(n.p2b, {L}, WeightRole::Bias);
  p.finish();
  return w;
}

Graph build_vision_graph(const VisionConfig& v, const VisionWeights& w,
                         const std::map<std::string, int32_t>& index) {
  const int64_t D = v.hidden, G = v.grid(), T = 1 + G * G;
  const int64_t P = 3 * int64_t(v.patch_size) * v.patch_size, S = int64_t(v.shuffle) * v.shuffle;
  const int hd = int(D / v.n_heads);
  GraphBuilder b("vision", int32_t(T), index);
  // The tile goes in as it is ([3, size*size]); im2col is the graph's first op.
  const int32_t px = b.activation("pixels", int64_t(v.image_size) * v.image_size, 3);
  b.graph().input = px;
  const int32_t x = b.op(OpType::PatchIm2col, {px}, "vision.patches", P, -1);
  b.last().set(PatchIm2colAttrs{.patch = v.patch_size, .image = v.image_size});
  int32_t h = b.matmul(x, w.patch_w, w.patch_b, "vision.patch_embed", D, -1);
  h = b.op(OpType::Add, {h, b.weight(w.embed_add)}, "vision.embeddings", D, -1);
  for (int l = 0; l < v.n_layers; ++l) {
    const auto& ly = w.layers[size_t(l)];
    const std::string p = "vision.layer." + std::to_string(l) + ".";
    int32_t a = b.op(OpType::LayerNorm, {h, b.weight(ly.n1w), b.weight(ly.n1b)}, p + "norm1", D, l);
    b.last().set(NormAttrs{.eps = v.norm_eps});
    const int32_t q = b.matmul(a, ly.wq, ly.bq, p + "q", D, l);
    const int32_t k = b.matmul(a, ly.wk, ly.bk, p + "k", D, l);
    const int32_t vv = b.matmul(a, ly.wv, ly.bv, p + "v", D, l);
    const int32_t att = b.op(OpType::SelfAttention, {q, k, vv}, p + "attn", D, l);
    b.last().set(AttentionAttrs{.n_heads = v.n_heads,
                                .n_kv_heads = v.n_heads,
                                .head_dim = hd,
                                .scale = 1.0f / std::sqrt(float(hd))});
    const int32_t o = b.matmul(att, ly.wo, ly.bo, p + "attn_out", D, l);
    const int32_t h1 = b.op(OpType::Add, {h, o}, p + "attn_res", D, l);
    const int32_t n2 =
        b.op(OpType::LayerNorm, {h1, b.weight(ly.n2w), b.weight(ly.n2b)}, p + "norm2", D, l);
    b.last().set(NormAttrs{.eps = v.norm_eps});
    const int32_t f1 = b.matmul(n2, ly.fc1w, ly.fc1b, p + "fc1", v.ffn, l);
    const int32_t g = b.op(OpType::GeluErf, {f1}, p + "gelu", v.ffn, l);
    const int32_t f2 = b.matmul(g, ly.fc2w, ly.fc2b, p + "mlp_out", D, l);
    h = b.op(OpType::Add, {h1, f2}, p + "out", D, l);
  }
  const int64_t tokens = v.tokens_per_tile();
  const int32_t ps = b.op(OpType::PixelShuffle, {h}, "vision.pixel_shuffle", D * S, -1, tokens);
  b.last().set(PixelShuffleAttrs{.grid = int32_t(G), .factor = v.shuffle});
  int32_t y = b.op(OpType::LayerNorm, {ps, b.weight(w.pn_w), b.weight(w.pn_b)}, "mlp1.norm", D * S,
                   -1, tokens);
  b.last().set(NormAttrs{.eps = v.proj_norm_eps});
  y = b.matmul(y, w.p1w, w.p1b, "mlp1.fc1", v.llm_hidden, -1);
  y = b.op(OpType::GeluErf, {y}, "mlp1.gelu", v.llm_hidden, -1, tokens);
  y = b.matmul(y, w.p2w, w.p2b, "vision_embeds", v.llm_hidden, -1);
  b.graph().output = y;
  return std::move(b.graph());
}

}  // namespace edgevl::compiler
