// Qwen3-VL's language model (model_type qwen3_vl; the LLM's keys in text_config, model_type
// qwen3_vl_text): dense Qwen3 (per-head q/k RMSNorm with plain weights, explicit head_dim, no
// biases unless attention_bias) whose tensors live under model.language_model.*, with interleaved
// multimodal RoPE. MRoPE splits the head_dim / 2 rotary frequencies between three position axes:
// frequency i takes the height position when i % 3 == 1 and i < 3 * mrope_section[1], the width
// position when i % 3 == 2 and i < 3 * mrope_section[2], else the temporal one. Text tokens have t
// = h = w = their index, so for them MRoPE is exactly plain RoPE.
#include "core/error.h"
#include "models/blocks.h"
#include "models/llama.h"
#include "models/mrope.h"
#include "models/qwen3_vl_vision.h"

namespace edgevl::models {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// Qwen3-VL-2B-Instruct's config.json as believed published (not checked against the hub
// files here): Qwen3-1.7B-like text (28 layers, 2048 wide, 16 / 8 heads of 128, tied) and the
// 24-block, 1024-wide tower with DeepStack after blocks 5, 11 and 17.
ojson qwen3_vl_2b_config() {
  return ojson::parse(R"({
  "architectures": ["Qwen3VLForConditionalGeneration"],
  "image_token_id": 151655,
  "model_type": "qwen3_vl",
  "text_config": {
    "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
    "dtype": "bfloat16", "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
    "max_position_embeddings": 262144, "model_type": "qwen3_vl_text",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"mrope_interleaved": true, "mrope_section": [24, 20, 20],
                     "rope_type": "default"},
    "rope_theta": 5000000, "tie_word_embeddings": true, "use_cache": true,
    "vocab_size": 151936
  },
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.57.0.dev0",
  "video_token_id": 151656,
  "vision_config": {
    "deepstack_visual_indexes": [5, 11, 17], "depth": 24, "hidden_act": "gelu_pytorch_tanh",
    "hidden_size": 1024, "in_channels": 3, "initializer_range": 0.02,
    "intermediate_size": 4096, "model_type": "qwen3_vl", "num_heads": 16,
    "num_position_embeddings": 2304, "out_hidden_size": 2048, "patch_size": 16,
    "spatial_merge_size": 2, "temporal_patch_size": 2
  },
  "vision_end_token_id": 151653,
  "vision_start_token_id": 151652
})");
}

class Qwen3Vl final : public LlmFamily {
  static constexpr BoolFlag kAttentionBias{"attention_bias"};  // on q/k/v/o (published: false)

 public:
  // len(vision_config.deepstack_visual_indexes): DeepStack feature k is added to the hidden
  // states after decoder layer k, k < this.
  static constexpr const char* kDeepstack = "deepstack_layers";

  const char* name() const override { return "qwen3_vl"; }
  std::vector<std::string> model_types() const override { return {"qwen3_vl", "qwen3_vl_text"}; }
  std::vector<std::string> architectures() const override {
    return {"Qwen3VLForConditionalGeneration"};
  }
  // Qwen3VLTextConfig's defaults: max_position_embeddings 128000, head_dim 128.
  FamilyDefaults defaults() const override { return {128000, -1, -1, true, 128}; }
  std::vector<BoolFlag> flags() const override { return {kAttentionBias}; }
  void read_config(const JsonFields& f, LlmConfig& c) const override {
    // Qwen3VLTextRotaryEmbedding takes mrope_section [24, 20, 20] when the key is absent, and
    // clips the sections to the frequencies there are (a slice), so any head_dim works.
    read_mrope_section(f, c, {24, 20, 20});
  }
  void read_outer_config(const JsonFields& top, LlmConfig& c) const override {
    // Qwen3VLConfig ties by its own key, false when absent (not by text_config's).
    c.tie_embeddings = top.opt_bool("tie_word_embeddings", false);
    int32_t n = 3;  // Qwen3VLVisionConfig's default (8, 16, 24)
    if (const json* vc = top.opt_object("vision_config")) {
      const JsonFields v(*vc, top.what() + " vision_config");
      read_qwen_vision_config(v, c, true);
      n = int32_t(qwen_vision_shape(c).deepstack.size());
    }
    check(n <= c.n_layers, "{}: {} DeepStack features for {} decoder layers", top.what(), n,
          c.n_layers);
    // Qwen3VLConfig's token ids (defaults: the Qwen2 vocabulary's), for image prompts.
    c.flags.set("vision.image_token", top.opt_int("image_token_id", 151655));
    c.flags.set("vision.video_token", top.opt_int("video_token_id", 151656));
    c.flags.set("vision.start_token", top.opt_int("vision_start_token_id", 151652));
    c.flags.set("vision.end_token", top.opt_int("vision_end_token_id", 151653));
    c.flags.set(kDeepstack, n);
  }
  // The Llama decoder with MRoPE in every attention and, in graphs wider than one row (the
  // prompt's), DeepStack: after layer k the runtime's rows "deepstack.<k>" ([width, hidden],
  // the image rows' features, zeros elsewhere) are added. Decode steps carry no image rows.
  Graph decoder_graph(const std::string& name, int32_t width, const LlmConfig& c,
                      const DecoderTensors& t, const TensorIndex& index) const override {
    GraphBuilder b(name, width, index);
    int32_t x = b.activation("input", c.hidden);
    b.graph().input = x;
    const RopeTables rope{b.weight(t.rope_cos), b.weight(t.rope_sin)};
    const AttentionShape shape = AttentionShape::of(c);  // with the MRoPE sections
    const int32_t deepstack = name == "prefill" ? c.flags.get_int(kDeepstack, 0) : 0;
    for (int32_t l = 0; l < c.n_layers; ++l) {
      x = llama_decoder_layer(b, x, t.layers[size_t(l)], c, shape, rope, l);
      if (l < deepstack) {
        const int32_t f = b.activation("deepstack." + std::to_string(l), c.hidden);
        x = b.op(OpType::Add, {x, f}, "layer." + std::to_string(l) + ".deepstack", c.hidden, l);
      }
    }
    b.graph().output =
        rms_norm(b, x, t.final_norm, NormAttrs{.eps = c.norm_eps}, "final_norm", c.hidden, -1);
    return std::move(b.graph());
  }
  std::vector<TensorDef> tensors(const LlmConfig& c) const override {
    std::vector<TensorDef> t = llama_layout_tensors(
        c, {.qkv_bias = kAttentionBias(c), .o_bias = kAttentionBias(c), .qk_norm = true});
    // Qwen3VLForConditionalGeneration holds its Qwen3 under model.language_model.
    for (TensorDef& d : t)
      if (d.name.rfind("model.", 0) == 0) d.name = "model.language_model." + d.name.substr(6);
    return t;
  }
  std::vector<SynthArch> synth_archs() const override {
    SynthArch a{"qwen3-vl-2b", true, [](const SynthOverrides& o) {
                  check(!o.hf_names, "synth: qwen3-vl-2b has one layout (no --hf-names)");
                  ojson config = qwen3_vl_2b_config();
                  ojson& v = config["vision_config"];
                  if (o.vision_layers != -1) {
                    v["depth"] = o.vision_layers;
                    // DeepStack taps only blocks the shortened tower has.
                    ojson taps = ojson::array();
                    for (int k : v["deepstack_visual_indexes"])
                      if (k < o.vision_layers) taps.push_back(k);
                    v["deepstack_visual_indexes"] = taps;
                  }
                  if (o.layers != -1) config["text_config"]["num_hidden_layers"] = o.layers;
                  return qwen_vl_synth_files(
                      std::move(config),
                      ojson::parse(R"({"bos_token_id": 151643, "do_sample": true, )"
                                   R"("eos_token_id": [151645, 151643], "pad_token_id": 151643, )"
                                   R"("temperature": 0.7, "top_k": 20, "top_p": 0.8})"),
                      151652, o);
                }};
    return {a};
  }
  text::ChatTemplate chat_template(const std::string&) const override {
    // Qwen3-VL's template: ChatML, no default system message, no think block.
    return text::chatml_template("qwen3_vl", "");
  }
};

}  // namespace

const LlmFamily& qwen3_vl_family() {
  static const Qwen3Vl f;
  return f;
}

}  // namespace edgevl::models
