// Qwen3.5 (model_type qwen3_5; its text model qwen3_5_text): a hybrid decoder. Most layers are
// Gated DeltaNet linear attention (a causal conv over the q/k/v channels, L2-normalised q/k, a
// per-head decay, the delta-rule state of hv x dk x dv, a gated RMSNorm), every
// full_attention_interval-th one gated full attention (q_proj yields the query and a sigmoid
// output gate per head, q/k norms, RoPE on the first quarter of each head). All the decoder's
// RMSNorms except the GDN output norm are zero-centred: stored w, used as 1 + w. The hub
// checkpoints are the multimodal Qwen3_5ForConditionalGeneration: config.json nests the text
// model under text_config and the tensors under model.language_model.; the vision tower
// (model.visual.*) is Qwen3-VL's without DeepStack (models/qwen3_vl_vision.h, read when
// config.json has a vision_config); the multi-token-prediction head (mtp.*) is not read. The
// gated attention layers rotate the first partial_rotary_factor of each head with interleaved
// MRoPE over those rot / 2 frequencies (mrope_section, default [11, 11, 10]); image prompts give
// their rows 3D positions as Qwen3-VL's do, text rows have t = h = w (plain RoPE). The Gated
// DeltaNet layers take no positions.
#include <fmt/format.h>

#include "core/error.h"
#include "models/blocks.h"
#include "models/family.h"
#include "models/mrope.h"
#include "models/qwen3_vl_vision.h"

namespace edgevl::models {

namespace {

// The family's config, kept in LlmConfig::flags under config.json's names.
struct Dims {
  int32_t interval, hk, hv, dk, dv, taps;
  float partial;
  static Dims of(const LlmConfig& c) {
    const FamilyFlags& f = c.flags;
    return {f.get_int("full_attention_interval", 4),    f.get_int("linear_num_key_heads", 16),
            f.get_int("linear_num_value_heads", 32),    f.get_int("linear_key_head_dim", 128),
            f.get_int("linear_value_head_dim", 128),    f.get_int("linear_conv_kernel_dim", 4),
            f.get_float("partial_rotary_factor", 0.25f)};
  }
  bool full(int32_t layer) const { return (layer + 1) % interval == 0; }
  int64_t conv_channels() const { return 2 * int64_t(hk) * dk + int64_t(hv) * dv; }
};

using ojson = nlohmann::ordered_json;

// Qwen/Qwen3.5-0.8B's config.json as we believe it published (the text model's shape from the
// model card and third-party summaries: 24 layers of width 1024, 6 of them gated attention with
// 8 query / 2 KV heads of 256, FFN 3584, vocab 248320, rope theta 1e7, partial rotary 0.25;
// the Gated DeltaNet's 16 key / 16 value heads of 128 and the token ids are believed, not
// checked against the file). The vision tower's shape (depth 12, width 768, 12 heads, FFN 3072,
// out 1024, patch 16, temporal 2, merge 2, 2304 position embeddings) is believed from the same
// sources, not checked against the file; transformers' Qwen3_5VisionConfig defaults are the
// 27-block / 1152-wide tower of the larger models.
ojson qwen3_5_0_8b_config() {
  ojson c = ojson::parse(R"({
  "architectures": ["Qwen3_5ForConditionalGeneration"],
  "image_token_id": 248056,
  "model_type": "qwen3_5",
  "text_config": {
    "attention_bias": false,
    "attention_dropout": 0.0,
    "bos_token_id": null,
    "eos_token_id": 248044,
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "intermediate_size": 3584,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 16,
    "linear_value_head_dim": 128,
    "max_position_embeddings": 262144,
    "model_type": "qwen3_5_text",
    "num_attention_heads": 8,
    "num_hidden_layers": 24,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_parameters": {
      "mrope_interleaved": true,
      "mrope_section": [11, 11, 10],
      "partial_rotary_factor": 0.25,
      "rope_theta": 10000000,
      "rope_type": "default"
    },
    "tie_word_embeddings": true,
    "use_cache": true,
    "vocab_size": 248320
  },
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.57.0.dev0",
  "video_token_id": 248057,
  "vision_config": {
    "depth": 12,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_size": 768,
    "in_channels": 3,
    "intermediate_size": 3072,
    "model_type": "qwen3_5",
    "num_heads": 12,
    "num_position_embeddings": 2304,
    "out_hidden_size": 1024,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2
  },
  "vision_end_token_id": 248054,
  "vision_start_token_id": 248053
})");
  ojson types = ojson::array();
  for (int i = 0; i < 24; ++i) types.push_back((i + 1) % 4 ? "linear_attention" : "full_attention");
  c["text_config"]["layer_types"] = types;
  return c;
}

class Qwen35 final : public LlmFamily {
  // Qwen3_5Attention: q/k/v/o take bias=config.attention_bias (the GDN projections never do).
  static constexpr BoolFlag kAttentionBias{"attention_bias"};

 public:
  const char* name() const override { return "qwen3_5"; }
  std::vector<std::string> model_types() const override { return {"qwen3_5", "qwen3_5_text"}; }
  std::vector<std::string> architectures() const override {
    return {"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"};
  }
  FamilyDefaults defaults() const override { return {32768, -1, -1, true, 256}; }
  std::vector<BoolFlag> flags() const override { return {kAttentionBias}; }

  void read_config(const JsonFields& f, LlmConfig& c) const override {
    // layer_types as transformers' default writes them: full iff (i + 1) % interval == 0.
    int32_t interval = f.opt_int("full_attention_interval", 4);
    if (const nlohmann::json* lt = f.opt("layer_types"); lt && lt->is_array()) {
      check(int32_t(lt->size()) == c.n_layers, "{}: layer_types has {} entries for {} layers",
            f.what(), lt->size(), c.n_layers);
      int32_t first_full = -1;
      for (size_t i = 0; i < lt->size() && first_full < 0; ++i)
        if ((*lt)[i] == "full_attention") first_full = int32_t(i);
      interval = first_full >= 0 ? first_full + 1 : c.n_layers + 1;
      for (size_t i = 0; i < lt->size(); ++i) {
        const std::string want =
            (int32_t(i) + 1) % interval == 0 ? "full_attention" : "linear_attention";
        check((*lt)[i].is_string() && (*lt)[i].get<std::string>() == want,
              "{}: layer_types[{}] is {}; edgevl supports a full_attention layer every {} "
              "layers and linear_attention between",
              f.what(), i, (*lt)[i].dump(), interval);
      }
    }
    check(interval >= 1, "{}: full_attention_interval {} must be positive", f.what(), interval);
    c.flags.set("full_attention_interval", interval);
    for (auto [key, dflt] : {std::pair<const char*, int32_t>{"linear_num_key_heads", 16},
                             {"linear_num_value_heads", 32},
                             {"linear_key_head_dim", 128},
                             {"linear_value_head_dim", 128},
                             {"linear_conv_kernel_dim", 4}}) {
      const int32_t v = f.opt_int(key, dflt);
      check(v > 0 && v <= 65536, "{}: {} {} out of range", f.what(), key, v);
      c.flags.set(key, v);
    }
    const Dims d = Dims::of(c);
    check(d.hv % d.hk == 0,
          "{}: linear_num_value_heads {} is not a multiple of "
          "linear_num_key_heads {}",
          f.what(), d.hv, d.hk);
    check(d.taps <= 16, "{}: linear_conv_kernel_dim {} is over 16", f.what(), d.taps);
    float partial = 0.25f;  // transformers' default when the key is absent
    const char* rope_key = f.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
    if (const nlohmann::json* rp = f.opt_object(rope_key))
      partial =
          JsonFields(*rp, f.what() + " " + rope_key).opt_float("partial_rotary_factor", partial);
    if (f.has("partial_rotary_factor")) partial = f.opt_float("partial_rotary_factor", partial);
    const float rot = float(c.head_dim) * partial;
    check(partial > 0.f && partial <= 1.f && rot == float(int32_t(rot)) && int32_t(rot) % 2 == 0,
          "{}: partial_rotary_factor {} of head_dim {} is not an even number of dims", f.what(),
          partial, c.head_dim);
    c.flags.set("partial_rotary_factor", partial);
    // Qwen3_5TextRotaryEmbedding's default sections over the rot / 2 rotated frequencies.
    read_mrope_section(f, c, {11, 11, 10});
  }

  void read_outer_config(const JsonFields& top, LlmConfig& c) const override {
    const nlohmann::json* vc = top.opt_object("vision_config");
    if (!vc) return;  // a text-only checkpoint
    read_qwen_vision_config(JsonFields(*vc, top.what() + " vision_config"), c, false);
    // Qwen3_5Config's token ids (defaults: the Qwen3.5 vocabulary's), for image prompts.
    c.flags.set("vision.image_token", top.opt_int("image_token_id", 248056));
    c.flags.set("vision.video_token", top.opt_int("video_token_id", 248057));
    c.flags.set("vision.start_token", top.opt_int("vision_start_token_id", 248053));
    c.flags.set("vision.end_token", top.opt_int("vision_end_token_id", 248054));
  }

  int32_t rotary_dim(const LlmConfig& c) const override {
    return int32_t(float(c.head_dim) * Dims::of(c).partial);
  }

  std::vector<TensorDef> tensors(const LlmConfig& c) const override {
    const Dims dm = Dims::of(c);
    const int64_t d = c.hidden, hd = c.head_dim, q = int64_t(c.n_heads) * hd,
                  kv = int64_t(c.n_kv_heads) * hd, f = c.ffn, v = c.vocab_size, hv = dm.hv,
                  vd = hv * dm.dv, cc = dm.conv_channels();
    using R = WeightRole;
    std::vector<TensorDef> t;
    t.push_back(
        {"model.language_model.embed_tokens.weight", {v, d}, R::Embedding, Slot::Embedding});
    for (int32_t l = 0; l < c.n_layers; ++l) {
      const std::string p = fmt::format("model.language_model.layers.{}.", l);
      auto add = [&](std::string name, std::vector<int64_t> shape, R role, Slot slot,
                     float plus = 0.f) {
        t.push_back({p + name, std::move(shape), role, slot, l, plus});
      };
      add("input_layernorm.weight", {d}, R::Norm, Slot::AttnNorm, 1.f);
      if (dm.full(l)) {
        const bool bias = kAttentionBias(c);
        add("self_attn.q_proj.weight", {2 * q, d}, R::Linear, Slot::Fused);
        if (bias) add("self_attn.q_proj.bias", {2 * q}, R::Bias, Slot::Fused);
        add("self_attn.k_proj.weight", {kv, d}, R::Linear, Slot::Wk);
        if (bias) add("self_attn.k_proj.bias", {kv}, R::Bias, Slot::Bk);
        add("self_attn.v_proj.weight", {kv, d}, R::Linear, Slot::Wv);
        if (bias) add("self_attn.v_proj.bias", {kv}, R::Bias, Slot::Bv);
        add("self_attn.q_norm.weight", {hd}, R::Norm, Slot::QNorm, 1.f);
        add("self_attn.k_norm.weight", {hd}, R::Norm, Slot::KNorm, 1.f);
        add("self_attn.o_proj.weight", {d, q}, R::Linear, Slot::Wo);
        if (bias) add("self_attn.o_proj.bias", {d}, R::Bias, Slot::Bo);
      } else {
        add("linear_attn.in_proj_qkv.weight", {cc, d}, R::Linear, Slot::LinQkv);
        add("linear_attn.in_proj_z.weight", {vd, d}, R::Linear, Slot::LinZ);
        add("linear_attn.in_proj_b.weight", {hv, d}, R::Linear, Slot::LinB);
        add("linear_attn.in_proj_a.weight", {hv, d}, R::Linear, Slot::LinA);
        // Small tables the ops read as f32 (the Norm role keeps a tensor in float).
        add("linear_attn.conv1d.weight", {cc, 1, dm.taps}, R::Norm, Slot::LinConv);
        add("linear_attn.A_log", {hv}, R::Norm, Slot::LinALog);
        add("linear_attn.dt_bias", {hv}, R::Norm, Slot::LinDtBias);
        add("linear_attn.norm.weight", {dm.dv}, R::Norm, Slot::LinNorm);  // plain w
        add("linear_attn.out_proj.weight", {d, vd}, R::Linear, Slot::LinOut);
      }
      add("post_attention_layernorm.weight", {d}, R::Norm, Slot::FfnNorm, 1.f);
      add("mlp.gate_proj.weight", {f, d}, R::Linear, Slot::WGate);
      add("mlp.up_proj.weight", {f, d}, R::Linear, Slot::WUp);
      add("mlp.down_proj.weight", {d, f}, R::Linear, Slot::WDown);
    }
    t.push_back({"model.language_model.norm.weight", {d}, R::Norm, Slot::FinalNorm, -1, 1.f});
    if (!c.tie_embeddings) t.push_back({"lm_head.weight", {v, d}, R::LmHead, Slot::LmHead});
    return t;
  }

  // q_proj (and its bias) holds per head [query hd | gate hd], not all queries, then all gates.
  std::vector<SplitPart> split(const TensorDef& t, const LlmConfig& c) const override {
    const int64_t hd = c.head_dim, nh = c.n_heads, rows = nh * hd;
    const int64_t cols = t.shape.size() == 1 ? 1 : c.hidden;
    const bool w = t.shape.size() == 2;
    const std::string base = t.name.substr(0, t.name.rfind("q_proj."));
    return {
        {w ? Slot::Wq : Slot::Bq, base + (w ? "q_proj.query.weight" : "q_proj.query.bias"), rows,
         cols, 0, hd, 2 * hd, nh},
        {w ? Slot::WqGate : Slot::BqGate, base + (w ? "q_proj.gate.weight" : "q_proj.gate.bias"),
         rows, cols, hd, hd, 2 * hd, nh}};
  }

  std::vector<std::string> unused_ok() const override {
    // The MTP head, which transformers does not load either.
    return {"mtp.*"};
  }

  int32_t decoder_layer(GraphBuilder& b, int32_t x, const LayerTensors& t, const LlmConfig& c,
                        RopeTables rope, int32_t l) const override {
    const Dims dm = Dims::of(c);
    const int64_t d = c.hidden;
    const NormAttrs row_norm{.eps = c.norm_eps};
    const std::string p = "layer." + std::to_string(l) + ".";
    const int32_t h = rms_norm(b, x, t[Slot::AttnNorm], row_norm, p + "attn_norm", d, l);
    const int32_t o =
        dm.full(l)
            ? gated_attention(b, h, t, AttentionShape::of(c), rope, rotary_dim(c), p, l)
            : gated_delta_net(b, h, t, {d, dm.hk, dm.hv, dm.dk, dm.dv, dm.taps, c.norm_eps}, p, l);
    const int32_t x1 = b.op(OpType::Add, {x, o}, p + "attn_res", d, l);
    const int32_t h2 = rms_norm(b, x1, t[Slot::FfnNorm], row_norm, p + "ffn_norm", d, l);
    const int32_t f = swiglu_mlp(b, h2, t, c.ffn, d, p, l);
    return b.op(OpType::Add, {x1, f}, p + "out", d, l);
  }

  std::vector<SynthArch> synth_archs() const override {
    SynthArch a{"qwen3.5-0.8b", true, [](const SynthOverrides& o) {
                  check(!o.hf_names, "synth: qwen3.5-0.8b has one layout (no --hf-names)");
                  ojson config = qwen3_5_0_8b_config();
                  ojson& t = config["text_config"];
                  if (o.vision_layers != -1) config["vision_config"]["depth"] = o.vision_layers;
                  if (o.layers != -1) {
                    t["num_hidden_layers"] = o.layers;
                    ojson types = ojson::array();
                    for (int i = 0; i < o.layers; ++i)
                      types.push_back((i + 1) % 4 ? "linear_attention" : "full_attention");
                    t["layer_types"] = types;
                  }
                  return qwen_vl_synth_files(
                      std::move(config),
                      ojson::parse(R"({"bos_token_id": 248044, "do_sample": true, )"
                                   R"("eos_token_id": [248046, 248044], "pad_token_id": 248044, )"
                                   R"("temperature": 0.6, "top_k": 20, "top_p": 0.95})"),
                      248053, o);
                }};
    return {a};
  }

  text::ChatTemplate chat_template(const std::string&) const override {
    // ChatML without a default system message, as Qwen3.5's template renders text turns; its
    // generation prompt opens the reply thinking (enable_thinking, the template's default).
    text::ChatTemplate t = text::chatml_template("qwen3_5", "");
    t.reply_prefix = "<think>\n";
    t.reply_prefix_no_think = "<think>\n\n</think>\n\n";  // enable_thinking=false
    return t;
  }
};

}  // namespace

const LlmFamily& qwen3_5_family() {
  static const Qwen35 f;
  return f;
}

}  // namespace edgevl::models
