// InternVL's published shapes for `edgevl synth` (models/synth_arch.h): InternVL2-1B,
// InternVL2-2B, InternVL2.5-1B, InternVL3.5-1B and 2B as their config.json is published (the
// original naming), its transformers-native ("-hf") form, and the tokens InternVL adds to its
// LLM's tokenizer.
#include <fmt/format.h>

#include "core/error.h"
#include "models/internvl.h"
#include "models/registry.h"

namespace edgevl::models {

namespace {

using ojson = nlohmann::ordered_json;

// The LLM an InternVL model wraps, as far as its tokenizer and -hf config differ.
enum class VlmLlm { Qwen2, Qwen25, InternLM2, Qwen3 };

struct VlmArch {
  ojson config;      // config.json in the original naming, as published
  ojson generation;  // generation_config.json
  VlmLlm llm;
};

// A token the InternVL tokenizer holds beyond the plain LLM vocabulary.
struct AddedToken {
  int32_t id;
  std::string content;
  bool special;
};

// A plain LLM's published config.json, as its family declares it for synth.
ojson llm_arch_config(const std::string& arch) {
  for (const LlmFamily* f : llm_families())
    for (const SynthArch& a : f->synth_archs())
      if (a.name == arch) return a.files({}).config;
  fail("internal: no synth arch '{}'", arch);
}

// vision_config of InternViT-300M-448px as published in OpenGVLab/InternVL2-1B (and, with the
// same values, InternVL2-2B; InternViT-300M-448px-V2_5 has the same shape and keys).
const char* const kVisionConfig = R"({
    "architectures": ["InternVisionModel"],
    "attention_dropout": 0.0,
    "drop_path_rate": 0.0,
    "dropout": 0.0,
    "hidden_act": "gelu",
    "hidden_size": 1024,
    "image_size": 448,
    "initializer_factor": 1.0,
    "initializer_range": 0.02,
    "intermediate_size": 4096,
    "layer_norm_eps": 1e-06,
    "model_type": "intern_vit_6b",
    "norm_type": "layer_norm",
    "num_attention_heads": 16,
    "num_channels": 3,
    "num_hidden_layers": 24,
    "output_attentions": false,
    "output_hidden_states": false,
    "patch_size": 14,
    "qk_normalization": false,
    "qkv_bias": true,
    "return_dict": true,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.37.2",
    "use_bfloat16": true,
    "use_flash_attn": true
  })";

// The InternVLChatConfig around an llm_config, key order as published.
ojson wrap(const ojson& llm, const std::string& tmpl) {
  ojson c = ojson::object();
  c["_commit_hash"] = nullptr;
  c["architectures"] = {"InternVLChatModel"};
  c["auto_map"] = {{"AutoConfig", "configuration_internvl_chat.InternVLChatConfig"},
                   {"AutoModel", "modeling_internvl_chat.InternVLChatModel"},
                   {"AutoModelForCausalLM", "modeling_internvl_chat.InternVLChatModel"}};
  c["downsample_ratio"] = 0.5;
  c["dynamic_image_size"] = true;
  c["force_image_size"] = 448;
  c["llm_config"] = llm;
  c["max_dynamic_patch"] = 12;
  c["min_dynamic_patch"] = 1;
  c["model_type"] = "internvl_chat";
  c["ps_version"] = "v2";
  c["select_layer"] = -1;
  c["template"] = tmpl;
  c["torch_dtype"] = "bfloat16";
  c["use_backbone_lora"] = 0;
  c["use_llm_lora"] = 0;
  c["use_thumbnail"] = true;
  c["vision_config"] = ojson::parse(kVisionConfig);
  return c;
}

// llm_config of OpenGVLab/InternVL2-1B (Qwen/Qwen2-0.5B-Instruct), as published minus the
// PretrainedConfig generation defaults transformers 4.37 dumps into nested configs.
const char* const kInternVL2_1B_Llm = R"({
    "_name_or_path": "Qwen/Qwen2-0.5B-Instruct",
    "add_cross_attention": false,
    "architectures": ["Qwen2ForCausalLM"],
    "_attn_implementation": "flash_attention_2",
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "hidden_act": "silu",
    "hidden_size": 896,
    "initializer_range": 0.02,
    "intermediate_size": 4864,
    "max_position_embeddings": 32768,
    "max_window_layers": 24,
    "model_type": "qwen2",
    "num_attention_heads": 14,
    "num_hidden_layers": 24,
    "num_key_value_heads": 2,
    "pad_token_id": null,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
    "tie_word_embeddings": false,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.37.2",
    "use_bfloat16": true,
    "use_cache": true,
    "use_sliding_window": false,
    "vocab_size": 151655
  })";

// llm_config of OpenGVLab/InternVL2-2B (internlm/internlm2-chat-1_8b; 92544 + 9 InternVL
// tokens = 92553).
const char* const kInternVL2_2B_Llm = R"({
    "_name_or_path": "internlm/internlm2-chat-1_8b",
    "add_cross_attention": false,
    "architectures": ["InternLM2ForCausalLM"],
    "attn_implementation": "flash_attention_2",
    "auto_map": {
      "AutoConfig": "configuration_internlm2.InternLM2Config",
      "AutoModel": "modeling_internlm2.InternLM2ForCausalLM",
      "AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM"
    },
    "bias": false,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 8192,
    "max_position_embeddings": 32768,
    "model_type": "internlm2",
    "num_attention_heads": 16,
    "num_hidden_layers": 24,
    "num_key_value_heads": 8,
    "pad_token_id": 2,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 2.0, "type": "dynamic"},
    "rope_theta": 1000000,
    "tie_word_embeddings": false,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.37.2",
    "use_bfloat16": true,
    "use_cache": true,
    "vocab_size": 92553
  })";

// llm_config of OpenGVLab/InternVL2_5-1B (Qwen2.5-0.5B-Instruct; 151665 + 9 InternVL tokens
// = 151674).
const char* const kInternVL25_1B_Llm = R"({
    "_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct",
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "hidden_act": "silu",
    "hidden_size": 896,
    "initializer_range": 0.02,
    "intermediate_size": 4864,
    "max_position_embeddings": 32768,
    "max_window_layers": 21,
    "model_type": "qwen2",
    "num_attention_heads": 14,
    "num_hidden_layers": 24,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
    "tie_word_embeddings": false,
    "torch_dtype": "bfloat16",
    "use_bfloat16": true,
    "use_cache": true,
    "use_sliding_window": false,
    "vocab_size": 151674
  })";

const char* const kInternVLTokens[9] = {"<img>", "</img>", "<IMG_CONTEXT>", "<quad>", "</quad>",
                                        "<ref>", "</ref>", "<box>",         "</box>"};

VlmArch internvl_arch(const std::string& name) {
  if (name == "internvl2-1b")
    return {wrap(ojson::parse(kInternVL2_1B_Llm), "Hermes-2"),
            ojson{{"_from_model_config", true},
                  {"transformers_version", "4.37.2"},
                  {"eos_token_id", {151644, 151645}}},
            VlmLlm::Qwen2};
  if (name == "internvl2-2b")
    return {wrap(ojson::parse(kInternVL2_2B_Llm), "internlm2-chat"),
            ojson{{"_from_model_config", true},
                  {"transformers_version", "4.37.2"},
                  {"eos_token_id", {92542, 92543}}},
            VlmLlm::InternLM2};
  if (name == "internvl2.5-1b") {
    ojson c = wrap(ojson::parse(kInternVL25_1B_Llm), "internvl2_5");
    c.erase("_commit_hash");
    return {c,
            ojson{{"_from_model_config", true},
                  {"transformers_version", "4.37.2"},
                  {"eos_token_id", {151644, 151645}}},
            VlmLlm::Qwen25};
  }
  if (name == "internvl3.5-1b" || name == "internvl3.5-2b") {
    // InternVL3.5 keeps InternVL2.5's conversation template (config "template": "internvl2_5").
    // llm_config: Qwen3-0.6B's / 1.7B's config (vocab 151936 already holds the 151669 Qwen3
    // tokens and the 9 InternVL ones), untied as InternVLChatConfig forces.
    ojson llm = ojson::object();
    llm["_name_or_path"] = name == "internvl3.5-1b" ? "Qwen/Qwen3-0.6B" : "Qwen/Qwen3-1.7B";
    const ojson base = llm_arch_config(name == "internvl3.5-1b" ? "qwen3-0.6b" : "qwen3-1.7b");
    for (const auto& [k, v] : base.items()) llm[k] = v;
    llm["tie_word_embeddings"] = false;
    llm["use_bfloat16"] = true;
    ojson c = wrap(llm, "internvl2_5");
    c.erase("_commit_hash");
    return {c,
            ojson{{"_from_model_config", true},
                  {"transformers_version", "4.51.0"},
                  {"eos_token_id", {151645, 151643}}},
            VlmLlm::Qwen3};
  }
  fail("synth: '{}' is not an InternVL architecture", name);
}

// Size of the LLM tokenizer the synth tokenizer writers produce (before the added tokens).
int32_t base_tokenizer_size(VlmLlm llm) {
  switch (llm) {
    case VlmLlm::Qwen2: return 151646;   // 151643 regular + <|endoftext|> <|im_start|> <|im_end|>
    case VlmLlm::Qwen25: return 151646;  // the Qwen2.5 extras are added tokens (below)
    case VlmLlm::Qwen3: return 151646;   // so are Qwen3's
    case VlmLlm::InternLM2: return 92544;
  }
  return 0;
}

// In id order: for Qwen2.5, its own extra added tokens (151646..151664) first, for Qwen3
// those and <tool_response>, </tool_response>, <think>, </think> (151646..151668); then <img>,
// </img>, <IMG_CONTEXT>, <quad>, </quad>, <ref>, </ref>, <box>, </box>.
std::vector<AddedToken> internvl_added_tokens(VlmLlm llm) {
  std::vector<AddedToken> t;
  int32_t next = llm == VlmLlm::InternLM2 ? 92544 : 151646;
  if (llm == VlmLlm::Qwen25 || llm == VlmLlm::Qwen3) {
    // Qwen2.5's own added tokens (tokenizer_config.json of Qwen2.5 and InternVL2.5/3).
    const std::pair<const char*, bool> q[] = {
        {"<|object_ref_start|>", true}, {"<|object_ref_end|>", true}, {"<|box_start|>", true},
        {"<|box_end|>", true},          {"<|quad_start|>", true},     {"<|quad_end|>", true},
        {"<|vision_start|>", true},     {"<|vision_end|>", true},     {"<|vision_pad|>", true},
        {"<|image_pad|>", true},        {"<|video_pad|>", true},      {"<tool_call>", false},
        {"</tool_call>", false},        {"<|fim_prefix|>", false},    {"<|fim_middle|>", false},
        {"<|fim_suffix|>", false},      {"<|fim_pad|>", false},       {"<|repo_name|>", false},
        {"<|file_sep|>", false}};
    for (const auto& [c, sp] : q) t.push_back({next++, c, sp});
  }
  if (llm == VlmLlm::Qwen3)
    for (const char* c : {"<tool_response>", "</tool_response>", "<think>", "</think>"})
      t.push_back({next++, c, false});
  for (const char* c : kInternVLTokens) t.push_back({next++, c, true});
  return t;
}

int32_t img_context_id(VlmLlm llm) {
  for (const auto& t : internvl_added_tokens(llm))
    if (t.content == "<IMG_CONTEXT>") return t.id;
  return -1;
}

// Merges the added tokens into tokenizer_config.json (added_tokens_decoder and
// additional_special_tokens), where the importer picks them up.
void add_tokens_to_tokenizer_config(ojson& cfg, const std::vector<AddedToken>& toks) {
  ojson& added = cfg["added_tokens_decoder"];
  for (const auto& t : toks)
    added[std::to_string(t.id)] = {{"content", t.content}, {"lstrip", false},
                                   {"normalized", false},  {"rstrip", false},
                                   {"single_word", false}, {"special", t.special}};
  ojson& extra = cfg["additional_special_tokens"];
  if (!extra.is_array()) extra = ojson::array();
  for (const char* c : kInternVLTokens) extra.push_back(c);
  cfg["model_max_length"] = 8192;  // InternVL2 repos: the 8k training context
}

// config.json of the transformers-native layout ("model_type": "internvl") for the original
// config `orig` (overrides already applied).
ojson to_hf_config(const ojson& orig, VlmLlm llm) {
  const ojson& l = orig.at("llm_config");
  const ojson& v = orig.at("vision_config");
  const int64_t layers = l.at("num_hidden_layers").get<int64_t>();
  ojson text = ojson::object();
  if (llm == VlmLlm::InternLM2) {
    // The -hf conversions of InternLM2-based models rewrite the LLM as llama.
    const int64_t heads = l.at("num_attention_heads").get<int64_t>();
    text = {{"attention_bias", false},
            {"attention_dropout", 0.0},
            {"bos_token_id", l.at("bos_token_id")},
            {"eos_token_id", l.at("eos_token_id")},
            {"head_dim", l.at("hidden_size").get<int64_t>() / heads},
            {"hidden_act", "silu"},
            {"hidden_size", l.at("hidden_size")},
            {"initializer_range", 0.02},
            {"intermediate_size", l.at("intermediate_size")},
            {"max_position_embeddings", l.at("max_position_embeddings")},
            {"mlp_bias", false},
            {"model_type", "llama"},
            {"num_attention_heads", heads},
            {"num_hidden_layers", layers},
            {"num_key_value_heads", l.at("num_key_value_heads")},
            {"pad_token_id", l.value("pad_token_id", ojson())},
            {"pretraining_tp", 1},
            {"rms_norm_eps", l.at("rms_norm_eps")},
            {"rope_parameters", {{"rope_theta", l.at("rope_theta")}, {"rope_type", "default"}}},
            {"tie_word_embeddings", false},
            {"use_cache", true},
            {"vocab_size", l.at("vocab_size")}};
  } else {
    std::vector<std::string> types(size_t(layers), "full_attention");
    const bool qwen3 = llm == VlmLlm::Qwen3;
    text = {{"attention_dropout", 0.0},
            {"bos_token_id", l.at("bos_token_id")},
            {"eos_token_id", l.at("eos_token_id")},
            {"hidden_act", "silu"},
            {"hidden_size", l.at("hidden_size")},
            {"initializer_range", 0.02},
            {"intermediate_size", l.at("intermediate_size")},
            {"layer_types", types},
            {"max_position_embeddings", l.at("max_position_embeddings")},
            {"max_window_layers", l.at("max_window_layers")},
            {"model_type", qwen3 ? "qwen3" : "qwen2"},
            {"num_attention_heads", l.at("num_attention_heads")},
            {"num_hidden_layers", layers},
            {"num_key_value_heads", l.at("num_key_value_heads")},
            {"rms_norm_eps", l.at("rms_norm_eps")},
            {"rope_parameters", {{"rope_theta", l.at("rope_theta")}, {"rope_type", "default"}}},
            {"sliding_window", nullptr},
            {"tie_word_embeddings", false},
            {"use_cache", true},
            {"use_sliding_window", false},
            {"vocab_size", l.at("vocab_size")}};
    if (qwen3) {
      text["attention_bias"] = false;
      text["head_dim"] = l.at("head_dim");
    }
  }
  const int64_t image = v.at("image_size").get<int64_t>(),
                patch = v.at("patch_size").get<int64_t>();
  const double ratio = orig.at("downsample_ratio").get<double>();
  const int64_t per_side = int64_t(double(image / patch) * ratio + 0.5);
  ojson vision = {{"attention_bias", v.at("qkv_bias")},
                  {"attention_dropout", 0.0},
                  {"hidden_act", v.at("hidden_act")},
                  {"hidden_dropout_prob", 0.0},
                  {"hidden_size", v.at("hidden_size")},
                  {"image_size", {image, image}},
                  {"initializer_range", 0.02},
                  {"intermediate_size", v.at("intermediate_size")},
                  {"layer_norm_eps", v.at("layer_norm_eps")},
                  {"layer_scale_init_value", 0.1},
                  {"model_type", "internvl_vision"},
                  {"norm_type", v.at("norm_type")},
                  {"num_attention_heads", v.at("num_attention_heads")},
                  {"num_channels", 3},
                  {"num_hidden_layers", v.at("num_hidden_layers")},
                  {"patch_size", {patch, patch}},
                  {"projection_dropout", 0.0},
                  {"use_absolute_position_embeddings", true},
                  {"use_mask_token", false},
                  {"use_mean_pooling", true},
                  {"use_qk_norm", v.at("qk_normalization")}};
  return {{"architectures", {"InternVLForConditionalGeneration"}},
          {"downsample_ratio", ratio},
          {"image_seq_length", per_side * per_side},
          {"image_token_id", img_context_id(llm)},
          {"model_type", "internvl"},
          {"projector_hidden_act", "gelu"},
          {"text_config", text},
          {"tie_word_embeddings", false},
          {"torch_dtype", orig.at("torch_dtype")},
          {"transformers_version", "4.52.0.dev0"},
          {"vision_config", vision},
          {"vision_feature_layer", orig.at("select_layer")},
          {"vision_feature_select_strategy", "default"}};
}

SynthFiles internvl_files(const std::string& name, const SynthOverrides& o) {
  VlmArch a = internvl_arch(name);
  ojson& llm = a.config["llm_config"];
  ojson& vis = a.config["vision_config"];
  if (o.layers != -1) llm["num_hidden_layers"] = o.layers;
  if (o.vision_layers != -1) vis["num_hidden_layers"] = o.vision_layers;
  if (!o.torch_dtype.empty()) {
    a.config["torch_dtype"] = llm["torch_dtype"] = vis["torch_dtype"] = o.torch_dtype;
    if (o.torch_dtype != "bfloat16") llm["use_bfloat16"] = vis["use_bfloat16"] = false;
  }
  const std::vector<AddedToken> added = internvl_added_tokens(a.llm);
  const int64_t vocab = llm["vocab_size"].get<int64_t>();
  check(added.back().id < vocab, "synth: token {} ('{}') does not fit the vocabulary of {}",
        added.back().id, added.back().content, vocab);
  SynthFiles f;
  f.config = o.hf_names ? to_hf_config(a.config, a.llm) : a.config;
  f.generation = a.generation;
  f.tokenizer = a.llm == VlmLlm::InternLM2 ? SynthTokenizer::SentencePieceInternLM2
                                           : SynthTokenizer::ByteLevelBpe;
  f.tokenizer_size = base_tokenizer_size(a.llm);
  f.edit_tokenizer_config = [added](ojson& cfg) { add_tokens_to_tokenizer_config(cfg, added); };
  return f;
}

}  // namespace

std::vector<SynthArch> internvl_synth_archs() {
  std::vector<SynthArch> archs;
  for (const char* name :
       {"internvl2-1b", "internvl2-2b", "internvl2.5-1b", "internvl3.5-1b", "internvl3.5-2b"})
    archs.push_back({name, true, [n = std::string(name)](const SynthOverrides& o) {
                       return internvl_files(n, o);
                     }});
  return archs;
}

}  // namespace edgevl::models
