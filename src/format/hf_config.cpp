#include "format/hf_config.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/mapped_file.h"

namespace edgevl {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json_file(const fs::path& p) {
  const std::string text = read_text_file(p);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // e.byte counts from 1; offsets elsewhere in edgevl count from 0.
    fail("{}: invalid JSON at byte offset {}: expected a JSON document ({})", p.string(),
         e.byte > 0 ? e.byte - 1 : 0, e.what());
  } catch (const json::exception& e) {
    fail("{}: cannot read JSON: {}", p.string(), e.what());
  }
}

namespace {

// A key whose value is null means "use the default" in transformers, same as absent.
const json* opt(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

int32_t as_int(const json& v, const char* key, const std::string& what) {
  int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
             v.get<double>() == std::floor(v.get<double>())) {
    x = int64_t(v.get<double>());
  } else {
    fail("{}: key '{}' is {}; expected an integer", what, key, v.dump());
  }
  check(x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max(),
        "{}: key '{}' = {} is out of the 32-bit range", what, key, x);
  return int32_t(x);
}

int32_t req_int(const json& j, const char* key, const std::string& what) {
  const json* v = opt(j, key);
  check(v != nullptr, "{}: missing required key '{}'", what, key);
  return as_int(*v, key, what);
}

int32_t opt_int(const json& j, const char* key, const std::string& what, int32_t def) {
  const json* v = opt(j, key);
  return v ? as_int(*v, key, what) : def;
}

float opt_float(const json& j, const char* key, const std::string& what, float def) {
  const json* v = opt(j, key);
  if (!v) return def;
  check(v->is_number(), "{}: key '{}' is {}; expected a number", what, key, v->dump());
  return v->get<float>();
}

bool opt_bool(const json& j, const char* key, const std::string& what, bool def) {
  const json* v = opt(j, key);
  if (!v) return def;
  check(v->is_boolean(), "{}: key '{}' is {}; expected true or false", what, key, v->dump());
  return v->get<bool>();
}

// eos_token_id may be one id or a list; returns them in order.
std::vector<int32_t> id_list(const json& j, const char* key, const std::string& what) {
  std::vector<int32_t> out;
  const json* v = opt(j, key);
  if (!v) return out;
  if (v->is_array()) {
    for (const auto& e : *v) out.push_back(as_int(e, key, what));
  } else {
    out.push_back(as_int(*v, key, what));
  }
  return out;
}

void add_eos(LlmConfig& c, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    if (c.eos_id < 0) {
      c.eos_id = id;
    } else if (id != c.eos_id && std::find(c.extra_eos_ids.begin(), c.extra_eos_ids.end(), id) ==
                                     c.extra_eos_ids.end()) {
      c.extra_eos_ids.push_back(id);
    }
  }
}

constexpr const char* kSupported = "qwen2, llama, internlm2";

Arch arch_of(const json& j, const std::string& what) {
  std::string mt;
  if (const json* v = opt(j, "model_type")) {
    check(v->is_string(), "{}: key 'model_type' is {}; expected a string", what, v->dump());
    mt = v->get<std::string>();
  } else if (const json* a = opt(j, "architectures");
             a && a->is_array() && !a->empty() && (*a)[0].is_string()) {
    // Some nested configs omit model_type; the class name says the same thing.
    const std::string cls = (*a)[0].get<std::string>();
    if (cls == "Qwen2ForCausalLM")
      mt = "qwen2";
    else if (cls == "LlamaForCausalLM")
      mt = "llama";
    else if (cls == "InternLM2ForCausalLM")
      mt = "internlm2";
    else
      fail("{}: architecture '{}' is not supported; edgevl supports model_type {}", what, cls,
           kSupported);
  } else {
    fail("{}: missing required key 'model_type' (edgevl supports {})", what, kSupported);
  }
  if (mt == "qwen2") return Arch::Qwen2;
  if (mt == "llama") return Arch::Llama;
  if (mt == "internlm2") return Arch::InternLM2;
  if (mt == "internvl_chat")
    fail("{}: model_type 'internvl_chat' is a vision-language wrapper; parse its 'llm_config'",
         what);
  fail("{}: model_type '{}' is not supported; edgevl supports {}", what, mt, kSupported);
}

void parse_rope_scaling(const json& j, LlmConfig& c, const std::string& what,
                        std::vector<std::string>* notes) {
  // transformers 5 moved rope settings into `rope_parameters`; accept both spellings.
  const char* key = "rope_scaling";
  const json* rs = opt(j, key);
  if (!rs) {
    key = "rope_parameters";
    rs = opt(j, key);
  }
  if (!rs) return;
  check(rs->is_object(), "{}: key '{}' is {}; expected null or an object", what, key, rs->dump());
  std::string type = "default";
  for (const char* k : {"rope_type", "type"})
    if (const json* t = opt(*rs, k); t && t->is_string()) type = t->get<std::string>();
  if (const json* th = opt(*rs, "rope_theta"); th && !opt(j, "rope_theta"))
    c.rope_theta = opt_float(*rs, "rope_theta", what, c.rope_theta);
  if (type == "default") return;
  if (type == "dynamic") {
    // Dynamic NTK recomputes the base only when the sequence exceeds max_position_embeddings
    // (transformers: base * (factor * len / max_pos - (factor - 1))^(d / (d - 2)) with
    // len = max(seq, max_pos)); below that it is plain RoPE, which is what edgevl computes,
    // and the compiled context never exceeds max_position_embeddings.
    if (notes)
      notes->push_back(fmt::format(
          "{}: rope_scaling 'dynamic' (factor {}) only changes RoPE past {} positions; edgevl "
          "uses plain RoPE (theta {}), exact up to that length",
          what, opt(*rs, "factor") ? opt(*rs, "factor")->dump() : "?", c.max_position,
          c.rope_theta));
    return;
  }
  fail("{}: {} type '{}' is not supported for model_type {} (edgevl supports plain RoPE and "
       "'dynamic' NTK scaling below max_position_embeddings)",
       what, key, type, arch_name(c.arch));
}

}  // namespace

LlmConfig parse_llm_config(const json& j, const std::string& what,
                           std::vector<std::string>* notes) {
  check(j.is_object(), "{}: expected a JSON object, got {}", what, j.type_name());
  LlmConfig c;
  c.arch = arch_of(j, what);

  c.vocab_size = req_int(j, "vocab_size", what);
  c.hidden = req_int(j, "hidden_size", what);
  c.n_layers = req_int(j, "num_hidden_layers", what);
  c.n_heads = req_int(j, "num_attention_heads", what);
  c.ffn = req_int(j, "intermediate_size", what);
  c.n_kv_heads = opt_int(j, "num_key_value_heads", what, c.n_heads);
  check(c.vocab_size > 0 && c.hidden > 0 && c.n_layers > 0 && c.n_heads > 0 && c.ffn > 0 &&
            c.n_kv_heads > 0,
        "{}: vocab_size, hidden_size, num_hidden_layers, num_attention_heads, "
        "num_key_value_heads and intermediate_size must be positive",
        what);
  check(c.n_heads % c.n_kv_heads == 0,
        "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", what, c.n_heads,
        c.n_kv_heads);
  // InternLM2's modeling code always derives head_dim from hidden_size; Llama/Qwen2 honour an
  // explicit head_dim key.
  const json* hd = c.arch == Arch::InternLM2 ? nullptr : opt(j, "head_dim");
  if (hd) {
    c.head_dim = as_int(*hd, "head_dim", what);
    check(c.head_dim > 0, "{}: head_dim must be positive", what);
  } else {
    check(c.hidden % c.n_heads == 0,
          "{}: hidden_size {} is not a multiple of num_attention_heads {} (and no head_dim key)",
          what, c.hidden, c.n_heads);
    c.head_dim = c.hidden / c.n_heads;
  }

  // Defaults below are those of the transformers config class of each family.
  c.norm_eps = opt_float(j, "rms_norm_eps", what, 1e-6f);
  c.rope_theta = opt_float(j, "rope_theta", what, 10000.f);
  c.max_position =
      opt_int(j, "max_position_embeddings", what, c.arch == Arch::Qwen2 ? 32768 : 2048);
  c.tie_embeddings = opt_bool(j, "tie_word_embeddings", what, false);
  switch (c.arch) {
    case Arch::Qwen2:
      c.qkv_bias = true;  // Qwen2Attention hard-codes bias=True on q/k/v, False on o
      check(!opt_bool(j, "use_sliding_window", what, false),
            "{}: use_sliding_window is true; edgevl supports only full attention", what);
      break;
    case Arch::Llama:
      c.qkv_bias = c.o_bias = opt_bool(j, "attention_bias", what, false);
      c.mlp_bias = opt_bool(j, "mlp_bias", what, false);
      break;
    case Arch::InternLM2:
      // modeling_internlm2.py: wqkv and wo both take bias=config.bias (default True); the
      // feed-forward w1/w2/w3 never have a bias.
      c.qkv_bias = c.o_bias = opt_bool(j, "bias", what, true);
      break;
  }
  if (const json* act = opt(j, "hidden_act"))
    check(act->is_string() && act->get<std::string>() == "silu",
          "{}: hidden_act {} is not supported; expected \"silu\"", what, act->dump());
  parse_rope_scaling(j, c, what, notes);

  const int32_t fam_bos = c.arch == Arch::Qwen2 ? -1 : 1;
  const int32_t fam_eos = c.arch == Arch::Qwen2 ? -1 : 2;
  c.bos_id = opt(j, "bos_token_id") ? req_int(j, "bos_token_id", what)
                                    : (j.contains("bos_token_id") ? -1 : fam_bos);
  std::vector<int32_t> eos = id_list(j, "eos_token_id", what);
  if (eos.empty() && !j.contains("eos_token_id") && fam_eos >= 0) eos.push_back(fam_eos);
  add_eos(c, eos);
  return c;
}

LlmConfig load_llm_config(const fs::path& dir, std::vector<std::string>* notes) {
  const fs::path cfg = dir / "config.json";
  check(fs::exists(cfg), "{}: missing (a hub checkpoint directory holds config.json)",
        cfg.string());
  const json j = read_json_file(cfg);
  check(j.is_object(), "{}: expected a JSON object at offset 0", cfg.string());
  LlmConfig c;
  const json* mt = opt(j, "model_type");
  if (mt && mt->is_string() && mt->get<std::string>() == "internvl_chat") {
    const json* llm = opt(j, "llm_config");
    check(llm != nullptr, "{}: model_type internvl_chat needs the key 'llm_config'", cfg.string());
    c = parse_llm_config(*llm, cfg.string() + " llm_config", notes);
    // InternVLChatConfig.__init__ forces tie_word_embeddings=False on its LLM: the wrapper's
    // checkpoints carry their own lm_head whatever the nested config says.
    c.tie_embeddings = false;
  } else if (mt && mt->is_string() && mt->get<std::string>() == "internvl") {
    // transformers-native InternVL ("-hf" repos): the LLM is `text_config`.
    const json* text = opt(j, "text_config");
    check(text != nullptr, "{}: model_type internvl needs the key 'text_config'", cfg.string());
    c = parse_llm_config(*text, cfg.string() + " text_config", notes);
    if (const json* tie = opt(j, "tie_word_embeddings"); tie && tie->is_boolean())
      c.tie_embeddings = tie->get<bool>();
  } else {
    c = parse_llm_config(j, cfg.string(), notes);
  }
  const fs::path gen = dir / "generation_config.json";
  if (fs::exists(gen)) {
    const json g = read_json_file(gen);
    check(g.is_object(), "{}: expected a JSON object at offset 0", gen.string());
    add_eos(c, id_list(g, "eos_token_id", gen.string()));
    if (c.bos_id < 0) c.bos_id = opt_int(g, "bos_token_id", gen.string(), -1);
  }
  return c;
}

}  // namespace edgevl
