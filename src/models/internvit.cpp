#include "models/internvit.h"

#include <fmt/format.h>

namespace edgevl::models {

std::string internvit_layer_prefix(VlmNaming naming, int64_t l) {
  return naming == VlmNaming::Original ? fmt::format("vision_model.encoder.layers.{}.", l)
                                       : fmt::format("model.vision_tower.encoder.layer.{}.", l);
}

InternVitTable internvit_table(VlmNaming naming, const InternVitShape& v, int64_t llm_hidden) {
  const int64_t d = v.hidden, f = v.ffn, g = v.image / v.patch;
  const int64_t dp = d * v.shuffle * v.shuffle, dl = llm_hidden;
  const bool orig = naming == VlmNaming::Original;
  InternVitTable t;
  const std::string e = orig ? "vision_model.embeddings." : "model.vision_tower.embeddings.";
  t.cls = {e + (orig ? "class_embedding" : "cls_token"), {1, 1, d}};
  t.patch_w = {e + (orig ? "patch_embedding.weight" : "patch_embeddings.projection.weight"),
               {d, 3, v.patch, v.patch}};
  t.patch_b = {e + (orig ? "patch_embedding.bias" : "patch_embeddings.projection.bias"), {d}};
  t.pos = {e + (orig ? "position_embedding" : "position_embeddings"), {1, g * g + 1, d}};
  for (int64_t i = 0; i < v.layers; ++i) {
    const std::string p = internvit_layer_prefix(naming, i);
    InternVitTable::Layer ly;
    auto bias = [&](const std::string& name, int64_t n) {
      return v.qkv_bias ? VisionTensor{p + name, {n}} : VisionTensor{};
    };
    if (orig) {
      ly.n1w = {p + "norm1.weight", {d}};
      ly.n1b = {p + "norm1.bias", {d}};
      ly.qkv_w = {p + "attn.qkv.weight", {3 * d, d}};
      ly.qkv_b = bias("attn.qkv.bias", 3 * d);
      ly.o_w = {p + "attn.proj.weight", {d, d}};
      ly.o_b = {p + "attn.proj.bias", {d}};
      ly.ls1 = {p + "ls1", {d}};
      ly.n2w = {p + "norm2.weight", {d}};
      ly.n2b = {p + "norm2.bias", {d}};
      ly.ls2 = {p + "ls2", {d}};
    } else {
      ly.n1w = {p + "layernorm_before.weight", {d}};
      ly.n1b = {p + "layernorm_before.bias", {d}};
      ly.q_w = {p + "attention.q_proj.weight", {d, d}};
      ly.q_b = bias("attention.q_proj.bias", d);
      ly.k_w = {p + "attention.k_proj.weight", {d, d}};
      ly.k_b = bias("attention.k_proj.bias", d);
      ly.v_w = {p + "attention.v_proj.weight", {d, d}};
      ly.v_b = bias("attention.v_proj.bias", d);
      ly.o_w = {p + "attention.projection_layer.weight", {d, d}};
      ly.o_b = {p + "attention.projection_layer.bias", {d}};
      ly.ls1 = {p + "lambda_1", {d}};
      ly.n2w = {p + "layernorm_after.weight", {d}};
      ly.n2b = {p + "layernorm_after.bias", {d}};
      ly.ls2 = {p + "lambda_2", {d}};
    }
    ly.fc1w = {p + "mlp.fc1.weight", {f, d}};
    ly.fc1b = {p + "mlp.fc1.bias", {f}};
    ly.fc2w = {p + "mlp.fc2.weight", {d, f}};
    ly.fc2b = {p + "mlp.fc2.bias", {d}};
    t.layers.push_back(ly);
  }
  const std::string m = orig ? "mlp1." : "model.multi_modal_projector.";
  t.pn_w = {m + (orig ? "0.weight" : "layer_norm.weight"), {dp}};
  t.pn_b = {m + (orig ? "0.bias" : "layer_norm.bias"), {dp}};
  t.p1w = {m + (orig ? "1.weight" : "linear_1.weight"), {dl, dp}};
  t.p1b = {m + (orig ? "1.bias" : "linear_1.bias"), {dl}};
  t.p2w = {m + (orig ? "3.weight" : "linear_2.weight"), {dl, dl}};
  t.p2b = {m + (orig ? "3.bias" : "linear_2.bias"), {dl}};
  return t;
}

std::vector<VisionTensor> InternVitTable::all() const {
  std::vector<VisionTensor> out;
  auto add = [&](std::initializer_list<const VisionTensor*> ts) {
    for (const VisionTensor* x : ts)
      if (x->present()) out.push_back(*x);
  };
  add({&cls, &patch_w, &patch_b, &pos});
  for (const Layer& l : layers)
    add({&l.n1w, &l.n1b, &l.qkv_w, &l.qkv_b, &l.q_w, &l.q_b,  &l.k_w,  &l.k_b,  &l.v_w,  &l.v_b,
         &l.o_w, &l.o_b, &l.ls1,   &l.n2w,   &l.n2b, &l.fc1w, &l.fc1b, &l.fc2w, &l.fc2b, &l.ls2});
  add({&pn_w, &pn_b, &p1w, &p1b, &p2w, &p2b});
  return out;
}

Graph internvit_graph(const VisionConfig& v, const InternVitWeights& w, const TensorIndex& index) {
  const int64_t D = v.hidden, G = v.grid(), T = 1 + G * G;
  const int64_t P = 3 * int64_t(v.patch_size) * v.patch_size, S = int64_t(v.shuffle) * v.shuffle;
  GraphBuilder b("vision", int32_t(T), index);
  // The tile goes in as it is ([3, size*size]); im2col is the graph's first op.
  const int32_t px = b.activation("pixels", int64_t(v.image_size) * v.image_size, 3);
  b.graph().input = px;
  const int32_t x = b.op(OpType::PatchIm2col, {px}, "vision.patches", P, -1);
  b.last().set(PatchIm2colAttrs{.patch = v.patch_size, .image = v.image_size});
  int32_t h = b.matmul(x, w.patch_w, w.patch_b, "vision.patch_embed", D, -1);
  h = b.op(OpType::Add, {h, b.weight(w.embed_add)}, "vision.embeddings", D, -1);
  const VitShape shape{.hidden = D, .ffn = v.ffn, .n_heads = v.n_heads, .norm_eps = v.norm_eps};
  for (int l = 0; l < v.n_layers; ++l)
    h = vit_block(b, h, w.layers[size_t(l)], shape, "vision.layer." + std::to_string(l) + ".", l);
  // Pixel shuffle (InternVL v2) and the mlp1 projector into the LLM's width.
  const int64_t tokens = v.tokens_per_tile();
  const int32_t ps = b.op(OpType::PixelShuffle, {h}, "vision.pixel_shuffle", D * S, -1, tokens);
  b.last().set(PixelShuffleAttrs{.grid = int32_t(G), .factor = v.shuffle});
  int32_t y = layer_norm(b, ps, w.pn_w, w.pn_b, v.proj_norm_eps, "mlp1.norm", D * S, -1, tokens);
  y = b.matmul(y, w.p1w, w.p1b, "mlp1.fc1", v.llm_hidden, -1);
  y = b.op(OpType::GeluErf, {y}, "mlp1.gelu", v.llm_hidden, -1, tokens);
  y = b.matmul(y, w.p2w, w.p2b, "vision_embeds", v.llm_hidden, -1);
  b.graph().output = y;
  return std::move(b.graph());
}

}  // namespace edgevl::models
