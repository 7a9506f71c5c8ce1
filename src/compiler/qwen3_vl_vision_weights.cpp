#include "compiler/qwen3_vl_vision_weights.h"

#include "core/error.h"
#include "core/rope_tables.h"
#include "format/safetensors.h"

namespace edgevl::compiler {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string r;
  for (int64_t d : s) r += (r.empty() ? "" : ", ") + std::to_string(d);
  return "[" + r + "]";
}

}  // namespace

QwenVisionWeights plan_qwen3_vl_vision(const Checkpoint& ckpt, const QwenVisionShape& s) {
  QwenVisionWeights w;
  const std::string v = "model.visual.";
  const int64_t C = s.hidden, C4 = 4 * C;
  auto need = [&](const std::string& name, std::vector<int64_t> shape) -> const TensorView* {
    const TensorView* t = ckpt.find(name);
    check(t != nullptr, "{}: tensor '{}' of the vision tower (model.visual.*) is missing",
          ckpt.dir().string(), name);
    check(t->shape == shape, "{}: tensor '{}' has shape {} but the vision config implies {}",
          ckpt.dir().string(), name, shape_text(t->shape), shape_text(shape));
    w.consumed.insert(name);
    return t;
  };
  // A tensor as stored (`as` its shape in the table when it is flattened).
  auto take = [&](const std::string& name, std::vector<int64_t> shape, WeightRole role,
                  std::vector<int64_t> as = {}) {
    const TensorView* t = need(name, shape);
    w.specs.push_back(
        {name, as.empty() ? shape : as, role, [t](float* o) { tensor_to_f32(*t, o); }});
    return name;
  };
  // Rows [part * rows, (part + 1) * rows) of a fused [3 * rows, ...] tensor.
  auto cut = [&](const std::string& name, std::vector<int64_t> shape, int part, WeightRole role,
                 const std::string& as_name) {
    const TensorView* t = need(name, shape);
    std::vector<int64_t> ps = shape;
    ps[0] /= 3;
    const size_t n = size_t(ps[0]) * (ps.size() > 1 ? size_t(ps[1]) : 1);
    w.specs.push_back({as_name, ps, role, [t, n, part](float* o) {
                         std::vector<float> all(3 * n);
                         tensor_to_f32(*t, all.data());
                         std::copy_n(all.begin() + long(size_t(part) * n), n, o);
                       }});
    return as_name;
  };
  auto& T = w.tensors;
  T.patch_w = take(v + "patch_embed.proj.weight", {C, 3, s.temporal, s.patch, s.patch},
                   WeightRole::Linear, {C, s.row_values()});
  T.patch_b = take(v + "patch_embed.proj.bias", {C}, WeightRole::Bias);
  w.pos_table =
      take(v + "pos_embed.weight", {int64_t(s.pos_side) * s.pos_side, C}, WeightRole::Constant);
  for (int32_t j = 0; j < s.depth; ++j) {
    const std::string p = v + "blocks." + std::to_string(j) + ".";
    models::QwenVisionTensors::Block b;
    b.n1w = take(p + "norm1.weight", {C}, WeightRole::Norm);
    b.n1b = take(p + "norm1.bias", {C}, WeightRole::Bias);
    const char* qkv[] = {"q", "k", "v"};
    std::string* ws[] = {&b.wq, &b.wk, &b.wv};
    std::string* bs[] = {&b.bq, &b.bk, &b.bv};
    for (int part = 0; part < 3; ++part) {
      *ws[part] = cut(p + "attn.qkv.weight", {3 * C, C}, part, WeightRole::Linear,
                      p + "attn." + qkv[part] + ".weight");
      *bs[part] = cut(p + "attn.qkv.bias", {3 * C}, part, WeightRole::Bias,
                      p + "attn." + qkv[part] + ".bias");
    }
    b.wo = take(p + "attn.proj.weight", {C, C}, WeightRole::Linear);
    b.bo = take(p + "attn.proj.bias", {C}, WeightRole::Bias);
    b.n2w = take(p + "norm2.weight", {C}, WeightRole::Norm);
    b.n2b = take(p + "norm2.bias", {C}, WeightRole::Bias);
    b.fc1w = take(p + "mlp.linear_fc1.weight", {s.ffn, C}, WeightRole::Linear);
    b.fc1b = take(p + "mlp.linear_fc1.bias", {s.ffn}, WeightRole::Bias);
    b.fc2w = take(p + "mlp.linear_fc2.weight", {C, s.ffn}, WeightRole::Linear);
    b.fc2b = take(p + "mlp.linear_fc2.bias", {C}, WeightRole::Bias);
    T.blocks.push_back(b);
  }
  auto merger = [&](const std::string& p, int64_t norm_cols) {
    models::QwenVisionTensors::Merger m;
    m.nw = take(p + "norm.weight", {norm_cols}, WeightRole::Norm);
    m.nb = take(p + "norm.bias", {norm_cols}, WeightRole::Bias);
    m.fc1w = take(p + "linear_fc1.weight", {C4, C4}, WeightRole::Linear);
    m.fc1b = take(p + "linear_fc1.bias", {C4}, WeightRole::Bias);
    m.fc2w = take(p + "linear_fc2.weight", {s.out, C4}, WeightRole::Linear);
    m.fc2b = take(p + "linear_fc2.bias", {s.out}, WeightRole::Bias);
    return m;
  };
  T.merger = merger(v + "merger.", C);
  for (size_t k = 0; k < s.deepstack.size(); ++k)
    T.deepstack.push_back(merger(v + "deepstack_merger_list." + std::to_string(k) + ".", C4));

  // The 2D rotary tables: column f of a row p holds position p's angle for frequency
  // f mod (head_dim / 4) (Qwen3VLVisionRotaryEmbedding: inv_freq over head_dim / 2 dims, the
  // same frequencies for the row and the column halves).
  const int64_t rows = s.rope_rows(), half = s.head_dim() / 2, quarter = half / 2;
  T.rope_cos = "vision.rope.cos";
  T.rope_sin = "vision.rope.sin";
  for (const bool is_cos : {true, false})
    w.specs.push_back({is_cos ? T.rope_cos : T.rope_sin,
                       {rows, half},
                       WeightRole::Constant,
                       [rows, half, quarter, is_cos](float* o) {
                         std::vector<float> c(size_t(rows * quarter)), sn(c.size());
                         rope_tables(10000.f, int(half), rows, c.data(), sn.data());
                         const std::vector<float>& t = is_cos ? c : sn;
                         for (int64_t p = 0; p < rows; ++p)
                           for (int64_t f = 0; f < half; ++f)
                             o[p * half + f] = t[size_t(p * quarter + f % quarter)];
                       }});
  return w;
}

}  // namespace edgevl::compiler
