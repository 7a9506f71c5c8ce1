#include "compiler/vision_model.h"

#include <cmath>

#include "compiler/graph_builder.h"
#include "core/error.h"
#include "format/safetensors.h"
#include "graph/planner.h"

namespace edgevl::compiler {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Checkpoint names of one naming scheme.
struct Names {
  std::string cls, patch_w, patch_b, pos;
  std::string layer;  // prefix of layer N, with "{}" for N
  bool fused_qkv;
  std::string qkv_w, qkv_b, q_w, q_b, k_w, k_b, v_w, v_b;
  std::string o_w, o_b, ls1, ls2, n1w, n1b, n2w, n2b, fc1w, fc1b, fc2w, fc2b;
  std::string pn_w, pn_b, p1w, p1b, p2w, p2b;
};

Names names_for(models::VlmNaming n) {
  if (n == models::VlmNaming::Original)
    return {"vision_model.embeddings.class_embedding",
            "vision_model.embeddings.patch_embedding.weight",
            "vision_model.embeddings.patch_embedding.bias",
            "vision_model.embeddings.position_embedding",
            "vision_model.encoder.layers.{}.",
            true,
            "attn.qkv.weight",
            "attn.qkv.bias",
            "",
            "",
            "",
            "",
            "",
            "",
            "attn.proj.weight",
            "attn.proj.bias",
            "ls1",
            "ls2",
            "norm1.weight",
            "norm1.bias",
            "norm2.weight",
            "norm2.bias",
            "mlp.fc1.weight",
            "mlp.fc1.bias",
            "mlp.fc2.weight",
            "mlp.fc2.bias",
            "mlp1.0.weight",
            "mlp1.0.bias",
            "mlp1.1.weight",
            "mlp1.1.bias",
            "mlp1.3.weight",
            "mlp1.3.bias"};
  return {"model.vision_tower.embeddings.cls_token",
          "model.vision_tower.embeddings.patch_embeddings.projection.weight",
          "model.vision_tower.embeddings.patch_embeddings.projection.bias",
          "model.vision_tower.embeddings.position_embeddings",
          "model.vision_tower.encoder.layer.{}.",
          false,
          "",
          "",
          "attention.q_proj.weight",
          "attention.q_proj.bias",
          "attention.k_proj.weight",
          "attention.k_proj.bias",
          "attention.v_proj.weight",
          "attention.v_proj.bias",
          "attention.projection_layer.weight",
          "attention.projection_layer.bias",
          "lambda_1",
          "lambda_2",
          "layernorm_before.weight",
          "layernorm_before.bias",
          "layernorm_after.weight",
          "layernorm_after.bias",
          "mlp.fc1.weight",
          "mlp.fc1.bias",
          "mlp.fc2.weight",
          "mlp.fc2.bias",
          "model.multi_modal_projector.layer_norm.weight",
          "model.multi_modal_projector.layer_norm.bias",
          "model.multi_modal_projector.linear_1.weight",
          "model.multi_modal_projector.linear_1.bias",
          "model.multi_modal_projector.linear_2.weight",
          "model.multi_modal_projector.linear_2.bias"};
}

class Planner {
 public:
  Planner(const Checkpoint& c, VisionWeights& w) : ckpt_(c), w_(w) {}

  const TensorView* get(const std::string& name, const std::vector<int64_t>& numel_shape) {
    const TensorView* t = ckpt_.find(name);
    if (!t) {
      missing_.push_back(name);
      return nullptr;
    }
    w_.consumed.insert(name);
    int64_t want = 1;
    for (int64_t d : numel_shape) want *= d;
    check(t->numel() == want, "{}: tensor '{}' has shape {} but the config implies {}",
          ckpt_.dir().string(), name, shape_str(t->shape), shape_str(numel_shape));
    return t;
  }

  // Adds a tensor to the table; `make` fills it. Returns its table name.
  std::string add(const std::string& name, std::vector<int64_t> shape, WeightRole role,
                  std::function<void(float*)> make) {
    w_.specs.push_back({name, std::move(shape), role, std::move(make)});
    return name;
  }
  std::string direct(const std::string& name, std::vector<int64_t> shape, WeightRole role) {
    const TensorView* t = get(name, shape);
    if (!t) return name;
    return add(name, shape, role, [t](float* out) { tensor_to_f32(*t, out); });
  }
  // Rows [first, first + rows) of a [*, cols] tensor (the fused qkv split).
  std::string rows_of(const std::string& out_name, const std::string& src, int64_t total_rows,
                      int64_t first, int64_t rows, int64_t cols, WeightRole role) {
    const TensorView* t = get(src, {total_rows, cols});
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
  std::string scaled(const std::string& out_name, const std::string& src, const std::string& scale,
                     int64_t rows, int64_t cols, WeightRole role) {
    const TensorView* t =
        get(src, cols == 1 ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, cols});
    const TensorView* s = get(scale, {rows});
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

std::string layer_name(const std::string& pattern, int l, const std::string& leaf) {
  std::string p = pattern;
  p.replace(p.find("{}"), 2, std::to_string(l));
  return p + leaf;
}

}  // namespace

VisionWeights plan_vision_weights(const Checkpoint& ckpt, const models::VlmInfo& info) {
  const VisionConfig& v = info.vision;
  const Names n = names_for(info.naming);
  VisionWeights w;
  Planner p(ckpt, w);
  const int64_t D = v.hidden, P = 3 * int64_t(v.patch_size) * v.patch_size, G = v.grid();
  const int64_t T = 1 + G * G, F = v.ffn, S = int64_t(v.shuffle) * v.shuffle, L = v.llm_hidden;

  // Conv2d weight [D, 3, p, p] is already a [D, 3*p*p] matrix in the patch layout we feed.
  const TensorView* pw = p.get(n.patch_w, {D, 3, v.patch_size, v.patch_size});
  if (pw)
    w.patch_w = p.add("vision.patch_embed.weight", {D, P}, WeightRole::Linear,
                      [pw](float* out) { tensor_to_f32(*pw, out); });
  const TensorView* pb = p.get(n.patch_b, {D});
  if (pb)
    w.patch_b = p.add("vision.patch_embed.bias", {D}, WeightRole::Bias,
                      [pb](float* out) { tensor_to_f32(*pb, out); });
  // Row 0 of the input is zero, so the matmul leaves the bias there: adding (cls - bias)
  // makes it the class embedding. Every row then gets its position embedding.
  const TensorView* cls = p.get(n.cls, {D});
  const TensorView* pos = ckpt.find(n.pos);
  if (!pos) {
    p.get(n.pos, {T, D});
  } else {
    w.consumed.insert(n.pos);
    check(pos->numel() == T * D,
          "{}: tensor '{}' has shape {} but a {}x{} patch grid needs [1, {}, {}] (position "
          "embeddings for another image size are not supported yet)",
          ckpt.dir().string(), n.pos, shape_str(pos->shape), G, G, T, D);
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
    const std::string prefix = layer_name(n.layer, l, "");
    for (const std::string& name : ckpt.names())
      if (name.rfind(prefix, 0) == 0) w.consumed.insert(name);
  }
  for (int l = 0; l < v.n_layers; ++l) {
    VisionWeights::Layer ly;
    auto src = [&](const std::string& leaf) { return layer_name(n.layer, l, leaf); };
    const std::string dst = "vision.layers." + std::to_string(l) + ".";
    ly.n1w = p.direct(src(n.n1w), {D}, WeightRole::Norm);
    ly.n1b = p.direct(src(n.n1b), {D}, WeightRole::Bias);
    if (n.fused_qkv) {
      ly.wq = p.rows_of(dst + "q.weight", src(n.qkv_w), 3 * D, 0, D, D, WeightRole::Linear);
      ly.wk = p.rows_of(dst + "k.weight", src(n.qkv_w), 3 * D, D, D, D, WeightRole::Linear);
      ly.wv = p.rows_of(dst + "v.weight", src(n.qkv_w), 3 * D, 2 * D, D, D, WeightRole::Linear);
      if (info.vision_qkv_bias) {
        ly.bq = p.rows_of(dst + "q.bias", src(n.qkv_b), 3 * D, 0, D, 1, WeightRole::Bias);
        ly.bk = p.rows_of(dst + "k.bias", src(n.qkv_b), 3 * D, D, D, 1, WeightRole::Bias);
        ly.bv = p.rows_of(dst + "v.bias", src(n.qkv_b), 3 * D, 2 * D, D, 1, WeightRole::Bias);
      }
    } else {
      ly.wq = p.direct(src(n.q_w), {D, D}, WeightRole::Linear);
      ly.wk = p.direct(src(n.k_w), {D, D}, WeightRole::Linear);
      ly.wv = p.direct(src(n.v_w), {D, D}, WeightRole::Linear);
      if (info.vision_qkv_bias) {
        ly.bq = p.direct(src(n.q_b), {D}, WeightRole::Bias);
        ly.bk = p.direct(src(n.k_b), {D}, WeightRole::Bias);
        ly.bv = p.direct(src(n.v_b), {D}, WeightRole::Bias);
      }
    }
    ly.wo = p.scaled(dst + "attn_out.weight", src(n.o_w), src(n.ls1), D, D, WeightRole::Linear);
    ly.bo = p.scaled(dst + "attn_out.bias", src(n.o_b), src(n.ls1), D, 1, WeightRole::Bias);
    ly.n2w = p.direct(src(n.n2w), {D}, WeightRole::Norm);
    ly.n2b = p.direct(src(n.n2b), {D}, WeightRole::Bias);
    ly.fc1w = p.direct(src(n.fc1w), {F, D}, WeightRole::Linear);
    ly.fc1b = p.direct(src(n.fc1b), {F}, WeightRole::Bias);
    ly.fc2w = p.scaled(dst + "fc2.weight", src(n.fc2w), src(n.ls2), D, F, WeightRole::Linear);
    ly.fc2b = p.scaled(dst + "fc2.bias", src(n.fc2b), src(n.ls2), D, 1, WeightRole::Bias);
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
  plan_arena(b.graph());
  return std::move(b.graph());
}

}  // namespace edgevl::compiler
