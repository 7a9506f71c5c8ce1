#include "models/internvl.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "format/json_fields.h"

namespace edgevl::models {

namespace {

using json = nlohmann::json;

const json& need(const json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  check(it != j.end() && !it->is_null(), "{}: missing key '{}'", what, key);
  return *it;
}

int32_t get_int(const json& j, const char* key, const std::string& what) {
  const json& v = need(j, key, what);
  // image_size / patch_size are lists [h, w] in transformers-native configs.
  if (v.is_array()) {
    check(v.size() == 2 && v[0].is_number_integer() && v[0] == v[1],
          "{}: '{}' must be square, got {}", what, key, v.dump());
    return v[0].get<int32_t>();
  }
  check(v.is_number_integer(), "{}: '{}' must be an integer, got {}", what, key, v.dump());
  return v.get<int32_t>();
}

template <class T>
T get_or(const json& j, const char* key, T dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  return it->get<T>();
}

}  // namespace

VlmInfo load_vlm_info(const std::filesystem::path& dir) {
  const auto path = dir / "config.json";
  const json j = read_json_file(path);
  const std::string what = path.string();
  VlmInfo info;
  const std::string mt = get_or<std::string>(j, "model_type", "");
  if (mt != "internvl_chat" && mt != "internvl") return info;
  info.is_vlm = true;
  info.naming = mt == "internvl" ? VlmNaming::TransformersNative : VlmNaming::Original;
  const json& vc = need(j, "vision_config", what);
  const std::string vwhat = what + " vision_config";
  VisionConfig& v = info.vision;
  v.hidden = get_int(vc, "hidden_size", vwhat);
  v.n_heads = get_int(vc, "num_attention_heads", vwhat);
  info.vision_layers = get_int(vc, "num_hidden_layers", vwhat);
  v.ffn = get_int(vc, "intermediate_size", vwhat);
  v.image_size = get_int(vc, "image_size", vwhat);
  v.patch_size = get_int(vc, "patch_size", vwhat);
  v.norm_eps = get_or<float>(vc, "layer_norm_eps", 1e-6f);
  check(v.hidden > 0 && v.n_heads > 0 && v.hidden % v.n_heads == 0 && v.patch_size > 0 &&
            v.image_size % v.patch_size == 0,
        "{}: inconsistent vision sizes (hidden {}, heads {}, image {}, patch {})", vwhat, v.hidden,
        v.n_heads, v.image_size, v.patch_size);
  const std::string norm = get_or<std::string>(vc, "norm_type", "layer_norm");
  check(norm == "layer_norm",
        "{}: norm_type '{}' is not supported (InternViT-300M uses layer_norm)", vwhat, norm);
  const bool qk_norm = get_or<bool>(vc, "qk_normalization", get_or<bool>(vc, "use_qk_norm", false));
  check(!qk_norm, "{}: qk normalization (the InternViT-6B tower) is not supported yet", vwhat);
  const std::string act = get_or<std::string>(vc, "hidden_act", "gelu");
  check(act == "gelu", "{}: hidden_act '{}' is not supported (expected gelu)", vwhat, act);
  info.vision_qkv_bias = get_or<bool>(vc, "qkv_bias", get_or<bool>(vc, "attention_bias", true));

  const float ratio = get_or<float>(j, "downsample_ratio", 0.5f);
  check(ratio > 0 && std::fabs(1.0f / ratio - std::round(1.0f / ratio)) < 1e-4f,
        "{}: downsample_ratio {} must be 1/integer", what, ratio);
  v.shuffle = int32_t(std::lround(1.0 / ratio));
  check(v.grid() % v.shuffle == 0, "{}: patch grid {} is not divisible by {}", what, v.grid(),
        v.shuffle);
  if (info.naming == VlmNaming::Original) {
    const std::string ps = get_or<std::string>(j, "ps_version", "v1");
    check(ps == "v2", "{}: ps_version '{}' is not supported (InternVL 2 and later use v2)", what,
          ps);
  }
  const int32_t select = info.naming == VlmNaming::Original
                             ? get_or<int32_t>(j, "select_layer", -1)
                             : get_or<int32_t>(j, "vision_feature_layer", -1);
  // hidden_states[select]: index 0 is the embeddings, so -1 is the last layer's output.
  const int32_t used = select < 0 ? info.vision_layers + 1 + select : select;
  check(used >= 1 && used <= info.vision_layers, "{}: select_layer {} out of range for {} layers",
        what, select, info.vision_layers);
  v.n_layers = used;
  v.min_tiles = get_or<int32_t>(j, "min_dynamic_patch", 1);
  v.max_tiles = get_or<int32_t>(j, "max_dynamic_patch", 12);
  v.use_thumbnail = get_or<bool>(j, "use_thumbnail", true);
  info.template_name = get_or<std::string>(j, "template", "");
  return info;
}

bool is_internvl_model_type(const std::string& mt) {
  return mt == "internvl_chat" || mt == "internvl";
}

std::optional<WrappedLlmConfig> internvl_llm_config(const json& j, const std::string& what) {
  const std::string mt = get_or<std::string>(j, "model_type", "");
  if (mt == "internvl_chat") {
    auto it = j.find("llm_config");
    check(it != j.end() && it->is_object(),
          "{}: model_type internvl_chat needs the key 'llm_config'", what);
    // InternVLChatConfig.__init__ forces tie_word_embeddings=False on its LLM: the wrapper's
    // checkpoints carry their own lm_head whatever the nested config says.
    return WrappedLlmConfig{&*it, what + " llm_config", false};
  }
  if (mt == "internvl") {
    auto it = j.find("text_config");
    check(it != j.end() && it->is_object(), "{}: model_type internvl needs the key 'text_config'",
          what);
    std::optional<bool> tie;
    if (auto t = j.find("tie_word_embeddings"); t != j.end() && t->is_boolean())
      tie = t->get<bool>();
    return WrappedLlmConfig{&*it, what + " text_config", tie};
  }
  return std::nullopt;
}

std::string LlmNaming::rename(const std::string& name) const {
  if (name.rfind("model.", 0) == 0) return body + name.substr(6);
  return head + name;
}

LlmNaming llm_naming(const VlmInfo& info) {
  if (!info.is_vlm) return {};
  return info.naming == VlmNaming::Original ? LlmNaming{"language_model.model.", "language_model."}
                                            : LlmNaming{"model.language_model.", ""};
}

LlmConfig hf_conversion_llm(const LlmConfig& c) {
  LlmConfig llm = c;
  llm.tie_embeddings = false;
  if (llm.family == "internlm2") {
    llm.family = "llama";
    llm.flags.clear();  // Llama's defaults: no attention or MLP bias
  }
  return llm;
}

text::ChatTemplate internvl_template(const VlmInfo& info, const std::string& llm_family,
                                     const std::string& hf_template, const std::string& what) {
  std::string name = info.template_name;
  // Transformers-native configs carry no template name: InternVL2 on InternLM2 used
  // internlm2-chat, 2.5 and later (the 书生·万象 system message; every Qwen3-based 3.5
  // model) internvl2_5, InternVL2 on Qwen2 Hermes-2.
  if (name.empty()) {
    if (llm_family == "internlm2")
      name = "internlm2-chat";
    else if (llm_family == "qwen3" || hf_template.find("书生·万象") != std::string::npos)
      name = "internvl2_5";
    else
      name = "Hermes-2";
  }
  text::ChatTemplate t;
  check(internvl_chat_template(name, &t),
        "{}: unknown InternVL template '{}' (supported: Hermes-2, internlm2-chat, internvl2_5)",
        what, name);
  return t;
}

bool internvl_chat_template(const std::string& name, text::ChatTemplate* out) {
  // From InternVL's conversation.py (SeparatorStyle.MPT): system_template
  // "<|im_start|>system\n{system_message}" + sep, then role + message + sep per turn.
  static const char* kInternVL2System =
      "你是由上海人工智能实验室联合商汤科技开发的书生多模态大模型，英文名叫InternVL, "
      "是一个有用无害的人工智能助手。";
  static const char* kInternVL25System =
      "你是书生·万象，英文名是InternVL，是由上海人工智能实验室、清华大学及多家合作单位联合开发的"
      "多模态大语言模型。";
  text::ChatTemplate t;
  t.name = name;
  t.turn_open_prefix = "<|im_start|>";
  t.turn_open_suffix = std::string(1, '\n');
  t.tokenizer_bos = true;
  t.stop_strings = {"<|im_end|>"};
  if (name == "Hermes-2") {
    t.default_system = kInternVL2System;
    t.turn_close = "<|im_end|>";
    t.stop_strings.push_back("<|endoftext|>");
  } else if (name == "internlm2-chat") {
    t.default_system = kInternVL2System;
    t.turn_close = "<|im_end|>";
  } else if (name == "internvl2_5") {
    t.default_system = kInternVL25System;
    t.turn_close = "<|im_end|>\n";
  } else {
    return false;
  }
  *out = t;
  return true;
}

}  // namespace edgevl::models
