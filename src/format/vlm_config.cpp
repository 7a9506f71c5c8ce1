#include "format/vlm_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "format/hf_config.h"

namespace edgevl {

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

}  // namespace edgevl
