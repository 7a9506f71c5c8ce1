#include "models/qwen3_vl_vision.h"

#include <cmath>

#include "core/error.h"
#include "models/blocks.h"

namespace edgevl::models {

namespace {

using json = nlohmann::json;

constexpr float kNormEps = 1e-6f;  // Qwen3VLVisionBlock / PatchMerger LayerNorms

int32_t positive(const JsonFields& v, const char* key, int32_t dflt) {
  const int32_t x = v.opt_int(key, dflt);
  check(x > 0, "{}: '{}' must be positive, got {}", v.what(), key, x);
  return x;
}

}  // namespace

void read_qwen_vision_config(const JsonFields& v, LlmConfig& c, bool deepstack) {
  // Qwen3VLVisionConfig's defaults for absent keys (Qwen3_5VisionConfig's are the same).
  QwenVisionShape s;
  s.depth = positive(v, "depth", 27);
  s.hidden = positive(v, "hidden_size", 1152);
  s.heads = positive(v, "num_heads", 16);
  s.ffn = positive(v, "intermediate_size", 4304);
  s.patch = positive(v, "patch_size", 16);
  s.temporal = positive(v, "temporal_patch_size", 2);
  s.merge = positive(v, "spatial_merge_size", 2);
  s.out = positive(v, "out_hidden_size", 3584);
  const int32_t n_pos = positive(v, "num_position_embeddings", 2304);
  s.pos_side = int32_t(std::lround(std::sqrt(double(n_pos))));
  check(s.pos_side * s.pos_side == n_pos, "{}: num_position_embeddings {} is not a square",
        v.what(), n_pos);
  check(s.hidden % s.heads == 0 && s.head_dim() % 4 == 0,
        "{}: hidden_size {} / num_heads {} must be a multiple of 4 (2D rotary)", v.what(), s.hidden,
        s.heads);
  check(s.merge == 2, "{}: spatial_merge_size {} is not supported (Qwen3-VL merges 2x2)", v.what(),
        s.merge);
  check(s.out == c.hidden, "{}: out_hidden_size {} differs from the LLM's hidden_size {}", v.what(),
        s.out, c.hidden);
  const std::string act = v.opt_string("hidden_act", "gelu_pytorch_tanh");
  check(act == "gelu_pytorch_tanh",
        "{}: hidden_act '{}' is not supported (Qwen3-VL's blocks use gelu_pytorch_tanh)", v.what(),
        act);
  if (const json* rp = v.opt_object("rope_parameters")) {
    const JsonFields r(*rp, v.what() + " rope_parameters");
    check(r.opt_string("rope_type", "axial") == "axial" &&
              r.opt_float("rope_theta", 10000.f) == 10000.f,
          "{}: only the axial rotary with theta 10000 is supported", r.what());
  }
  std::vector<int32_t> ds;
  if (deepstack) ds = {8, 16, 24};
  if (const json* d = deepstack ? v.opt("deepstack_visual_indexes") : nullptr) {
    check(d->is_array(), "{}: deepstack_visual_indexes must be a list", v.what());
    ds.clear();
    for (const json& k : *d) {
      check(k.is_number_integer() && k.get<int32_t>() >= 0 && k.get<int32_t>() < s.depth,
            "{}: deepstack_visual_indexes {} must name blocks below depth {}", v.what(), d->dump(),
            s.depth);
      ds.push_back(k.get<int32_t>());
    }
  }
  const std::pair<const char*, int32_t> ints[] = {
      {"vision.depth", s.depth},       {"vision.hidden", s.hidden},
      {"vision.heads", s.heads},       {"vision.ffn", s.ffn},
      {"vision.patch", s.patch},       {"vision.temporal", s.temporal},
      {"vision.merge", s.merge},       {"vision.out", s.out},
      {"vision.pos_side", s.pos_side}, {"vision.deepstack", int32_t(ds.size())}};
  for (const auto& [name, value] : ints) c.flags.set(name, value);
  for (size_t k = 0; k < ds.size(); ++k)
    c.flags.set("vision.deepstack." + std::to_string(k), ds[k]);
}

std::vector<QwenVisionCheckpointTensor> qwen_vision_checkpoint_tensors(const QwenVisionShape& s) {
  const std::string v = "model.visual.";
  const int64_t C = s.hidden, C4 = 4 * C, F = s.ffn;
  std::vector<QwenVisionCheckpointTensor> t = {
      {v + "patch_embed.proj.weight", {C, 3, s.temporal, s.patch, s.patch}},  // Conv3d
      {v + "patch_embed.proj.bias", {C}},
      {v + "pos_embed.weight", {int64_t(s.pos_side) * s.pos_side, C}}};
  for (int32_t j = 0; j < s.depth; ++j) {
    const std::string p = v + "blocks." + std::to_string(j) + ".";
    for (const auto& [name, shape] : std::vector<std::pair<const char*, std::vector<int64_t>>>{
             {"norm1.weight", {C}},
             {"norm1.bias", {C}},
             {"attn.qkv.weight", {3 * C, C}},  // [q | k | v] rows
             {"attn.qkv.bias", {3 * C}},
             {"attn.proj.weight", {C, C}},
             {"attn.proj.bias", {C}},
             {"norm2.weight", {C}},
             {"norm2.bias", {C}},
             {"mlp.linear_fc1.weight", {F, C}},
             {"mlp.linear_fc1.bias", {F}},
             {"mlp.linear_fc2.weight", {C, F}},
             {"mlp.linear_fc2.bias", {C}}})
      t.push_back({p + name, shape});
  }
  // The main merger normalises C before the 2x2 view, DeepStack's 4C after it.
  auto merger = [&](const std::string& p, int64_t norm_cols) {
    t.push_back({p + "norm.weight", {norm_cols}});
    t.push_back({p + "norm.bias", {norm_cols}});
    t.push_back({p + "linear_fc1.weight", {C4, C4}});
    t.push_back({p + "linear_fc1.bias", {C4}});
    t.push_back({p + "linear_fc2.weight", {s.out, C4}});
    t.push_back({p + "linear_fc2.bias", {s.out}});
  };
  merger(v + "merger.", C);
  for (size_t k = 0; k < s.deepstack.size(); ++k)
    merger(v + "deepstack_merger_list." + std::to_string(k) + ".", C4);
  return t;
}

Graph qwen3_vl_vision_graph(const QwenVisionShape& s, const QwenVisionTensors& t,
                            const TensorIndex& index) {
  check(s.max_patches > 0 && s.max_patches % 4 == 0, "internal: vision width {}", s.max_patches);
  GraphBuilder b("qwen_vision", s.max_patches, index);
  const int64_t C = s.hidden, W4 = s.max_patches / 4;
  const int hd = s.head_dim();
  const int32_t px = b.activation("pixels", s.row_values());
  b.graph().input = px;
  const int32_t pe = b.matmul(px, t.patch_w, t.patch_b, "patch_embed", C, -1);
  const int32_t pos = b.activation("vision.pos_embed", C);  // written by the runtime
  int32_t x = b.op(OpType::Add, {pe, pos}, "embed", C, -1);
  const int32_t cos = b.weight(t.rope_cos), sin = b.weight(t.rope_sin);

  auto merger = [&](int32_t in, const QwenVisionTensors::Merger& m, bool norm_first,
                    const std::string& p, int32_t l) {
    int32_t h = in;
    if (norm_first) h = layer_norm(b, h, m.nw, m.nb, kNormEps, p + "norm", C, l);
    h = b.op(OpType::View, {h}, p + "view", 4 * C, l, W4);
    b.last().set(ViewAttrs{.factor = 4});
    if (!norm_first) h = layer_norm(b, h, m.nw, m.nb, kNormEps, p + "norm", 4 * C, l, W4);
    h = b.matmul(h, m.fc1w, m.fc1b, p + "fc1", 4 * C, l);
    h = b.op(OpType::GeluErf, {h}, p + "gelu", 4 * C, l, W4);
    return b.matmul(h, m.fc2w, m.fc2b, p + "out", s.out, l);
  };

  std::vector<int32_t> features;
  for (int32_t j = 0; j < s.depth; ++j) {
    const QwenVisionTensors::Block& k = t.blocks[size_t(j)];
    const std::string p = "vision." + std::to_string(j) + ".";
    const int32_t a = layer_norm(b, x, k.n1w, k.n1b, kNormEps, p + "norm1", C, j);
    const int32_t q = b.matmul(a, k.wq, k.bq, p + "q", C, j);
    const int32_t kk = b.matmul(a, k.wk, k.bk, p + "k", C, j);
    const int32_t v = b.matmul(a, k.wv, k.bv, p + "v", C, j);
    // 2D rotary: frequencies [0, hd/4) follow the patch row, [hd/4, hd/2) its column.
    b.rope(q, cos, sin, s.heads, hd, j, 0, -hd / 4, -hd / 4);
    b.rope(kk, cos, sin, s.heads, hd, j, 0, -hd / 4, -hd / 4);
    const int32_t att = b.op(OpType::SelfAttention, {q, kk, v}, p + "attn", C, j);
    b.last().set(AttentionAttrs{.n_heads = s.heads,
                                .n_kv_heads = s.heads,
                                .head_dim = hd,
                                .scale = 1.0f / std::sqrt(float(hd))});
    const int32_t o = b.matmul(att, k.wo, k.bo, p + "attn_out", C, j);
    const int32_t x1 = b.op(OpType::Add, {x, o}, p + "attn_res", C, j);
    const int32_t n2 = layer_norm(b, x1, k.n2w, k.n2b, kNormEps, p + "norm2", C, j);
    const int32_t f1 = b.matmul(n2, k.fc1w, k.fc1b, p + "fc1", s.ffn, j);
    const int32_t g = b.op(OpType::GeluTanh, {f1}, p + "gelu", s.ffn, j);
    const int32_t f2 = b.matmul(g, k.fc2w, k.fc2b, p + "mlp_out", C, j);
    x = b.op(OpType::Add, {x1, f2}, p + "out", C, j);
    for (size_t d = 0; d < s.deepstack.size(); ++d)
      if (s.deepstack[d] == j)
        features.push_back(
            merger(x, t.deepstack[d], false, "vision.deepstack." + std::to_string(d) + ".", j));
  }
  const int32_t main = merger(x, t.merger, true, "vision.merger.", -1);
  std::vector<int32_t> all = {main};
  all.insert(all.end(), features.begin(), features.end());
  b.graph().output = all.size() == 1 ? main
                                     : b.op(OpType::ConcatCols, all, "vision_embeds",
                                            int64_t(s.out) * int64_t(all.size()), -1, W4);
  return std::move(b.graph());
}

SynthFiles qwen_vl_synth_files(nlohmann::ordered_json config, nlohmann::ordered_json generation,
                               int vision_start_id, const SynthOverrides& o) {
  SynthFiles f;
  f.config = std::move(config);
  if (!o.torch_dtype.empty()) f.config["torch_dtype"] = o.torch_dtype;
  f.generation = std::move(generation);
  f.tokenizer = SynthTokenizer::ByteLevelBpe;
  // The image processor as believed published (Qwen3-VL's: mean = std = 0.5, 64K to 16M
  // pixels).
  f.preprocessor = nlohmann::ordered_json::parse(R"({
  "image_mean": [0.5, 0.5, 0.5], "image_processor_type": "Qwen2VLImageProcessorFast",
  "image_std": [0.5, 0.5, 0.5], "merge_size": 2, "patch_size": 16,
  "processor_class": "Qwen3VLProcessor",
  "size": {"longest_edge": 16777216, "shortest_edge": 65536}, "temporal_patch_size": 2})");
  // The vision specials at their ids (the generated vocabulary has no pieces there), so image
  // prompts tokenize.
  const int s0 = vision_start_id;
  f.edit_tokenizer_config = [s0](nlohmann::ordered_json& cfg) {
    for (const auto& [id, text] :
         std::vector<std::pair<int, const char*>>{{s0, "<|vision_start|>"},
                                                  {s0 + 1, "<|vision_end|>"},
                                                  {s0 + 3, "<|image_pad|>"},
                                                  {s0 + 4, "<|video_pad|>"}}) {
      cfg["added_tokens_decoder"][std::to_string(id)] = {{"content", text},      {"lstrip", false},
                                                         {"normalized", false},  {"rstrip", false},
                                                         {"single_word", false}, {"special", true}};
      cfg["additional_special_tokens"].push_back(text);
    }
  };
  return f;
}

}  // namespace edgevl::models
