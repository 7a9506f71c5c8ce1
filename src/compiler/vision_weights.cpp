#include "compiler/vision_weights.h"

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
  models::InternVitWeights& names = w.tensors;
  Planner p(ckpt, w);
  const int64_t D = v.hidden, P = 3 * int64_t(v.patch_size) * v.patch_size, G = v.grid();
  const int64_t T = 1 + G * G, F = v.ffn, S = int64_t(v.shuffle) * v.shuffle, L = v.llm_hidden;

  // Conv2d weight [D, 3, p, p] is already a [D, 3*p*p] matrix in the patch layout we feed.
  const TensorView* pw = p.get(n.patch_w);
  if (pw)
    names.patch_w = p.add("vision.patch_embed.weight", {D, P}, WeightRole::Linear,
                          [pw](float* out) { tensor_to_f32(*pw, out); });
  const TensorView* pb = p.get(n.patch_b);
  if (pb)
    names.patch_b = p.add("vision.patch_embed.bias", {D}, WeightRole::Bias,
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
    names.embed_add =
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
    models::VitLayerTensors ly;
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
    names.layers.push_back(ly);
  }
  names.pn_w = p.direct(n.pn_w, {D * S}, WeightRole::Norm);
  names.pn_b = p.direct(n.pn_b, {D * S}, WeightRole::Bias);
  names.p1w = p.direct(n.p1w, {L, D * S}, WeightRole::Linear);
  names.p1b = p.direct(n.p1b, {L}, WeightRole::Bias);
  names.p2w = p.direct(n.p2w, {L, L}, WeightRole::Linear);
  names.p2b = p.direct(n.p2b, {L}, WeightRole::Bias);
  p.finish();
  return w;
}

}  // namespace edgevl::compiler
