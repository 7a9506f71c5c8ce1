#include "models/llm_config.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "format/json_fields.h"
#include "models/internvl.h"
#include "models/registry.h"

namespace edgevl::models {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

const LlmFamily& family_of(const JsonFields& f) {
  const std::string what = f.what();
  if (f.has("model_type")) {
    const std::string mt = f.opt_string("model_type", "");
    check(!is_internvl_model_type(mt),
          "{}: model_type '{}' is a vision-language wrapper; its LLM is described by "
          "'llm_config' (or 'text_config')",
          what, mt);
    const LlmFamily* fam = find_family(mt);
    check(fam != nullptr, "{}: model_type '{}' is not supported; edgevl supports {}", what, mt,
          supported_model_types());
    return *fam;
  }
  // Some nested configs omit model_type; the class name says the same thing.
  const json* a = f.opt("architectures");
  check(a && a->is_array() && !a->empty() && (*a)[0].is_string(),
        "{}: missing required key 'model_type' (edgevl supports {})", what,
        supported_model_types());
  const std::string cls = (*a)[0].get<std::string>();
  const LlmFamily* fam = find_family("", cls);
  check(fam != nullptr, "{}: architecture '{}' is not supported; edgevl supports model_type {}",
        what, cls, supported_model_types());
  return *fam;
}

void parse_rope_scaling(const JsonFields& f, LlmConfig& c, std::vector<std::string>* notes) {
  // transformers 5 moved rope settings into `rope_parameters`; accept both spellings.
  const char* key = f.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
  const json* rs = f.opt_object(key);
  if (!rs) return;
  const JsonFields r(*rs, f.what() + " " + key);
  std::string type = "default";
  for (const char* k : {"rope_type", "type"})
    if (const json* t = r.opt(k); t && t->is_string()) type = t->get<std::string>();
  if (r.has("rope_theta") && !f.has("rope_theta")) c.rope_theta = r.opt_float("rope_theta", 0);
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
          f.what(), r.opt("factor") ? r.opt("factor")->dump() : "?", c.max_position, c.rope_theta));
    return;
  }
  fail(
      "{}: {} type '{}' is not supported for model_type {} (edgevl supports plain RoPE and "
      "'dynamic' NTK scaling below max_position_embeddings)",
      f.what(), key, type, c.family);
}

// A multimodal checkpoint whose text model is a family of ours nested under text_config
// (Qwen3.5's Qwen3_5ForConditionalGeneration: model_type qwen3_5, text_config qwen3_5_text): the
// nested config, with the wrapper's model_type when it names none, and the wrapper's
// tie_word_embeddings (which is what transformers ties by).
struct NestedText {
  nlohmann::json config;
  std::string what;
  std::optional<bool> tie_embeddings;
};
std::optional<NestedText> nested_text_config(const json& j, const std::string& what) {
  const auto tc = j.find("text_config");
  const auto mt = j.find("model_type");
  if (tc == j.end() || !tc->is_object() || j.contains("hidden_size") || mt == j.end() ||
      !mt->is_string() || find_family(mt->get<std::string>()) == nullptr)
    return std::nullopt;
  NestedText n{*tc, what + " text_config", std::nullopt};
  if (!n.config.contains("model_type")) n.config["model_type"] = *mt;
  if (auto t = j.find("tie_word_embeddings"); t != j.end() && t->is_boolean())
    n.tie_embeddings = t->get<bool>();
  return n;
}

}  // namespace

LlmConfig parse_llm_config(const json& j, const std::string& what,
                           std::vector<std::string>* notes) {
  const JsonFields f(j, what);
  const LlmFamily& fam = family_of(f);
  const FamilyDefaults def = fam.defaults();
  LlmConfig c;
  c.family = fam.name();

  c.vocab_size = f.req_int("vocab_size");
  c.hidden = f.req_int("hidden_size");
  c.n_layers = f.req_int("num_hidden_layers");
  c.n_heads = f.req_int("num_attention_heads");
  c.ffn = f.req_int("intermediate_size");
  c.n_kv_heads = f.opt_int("num_key_value_heads", c.n_heads);
  check(c.vocab_size > 0 && c.hidden > 0 && c.n_layers > 0 && c.n_heads > 0 && c.ffn > 0 &&
            c.n_kv_heads > 0,
        "{}: vocab_size, hidden_size, num_hidden_layers, num_attention_heads, "
        "num_key_value_heads and intermediate_size must be positive",
        what);
  check(c.n_heads % c.n_kv_heads == 0,
        "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", what, c.n_heads,
        c.n_kv_heads);
  if (def.explicit_head_dim && f.has("head_dim")) {
    c.head_dim = f.req_int("head_dim");
    check(c.head_dim > 0, "{}: head_dim must be positive", what);
  } else if (def.explicit_head_dim && def.head_dim > 0) {
    c.head_dim = def.head_dim;
  } else {
    check(c.hidden % c.n_heads == 0,
          "{}: hidden_size {} is not a multiple of num_attention_heads {} (and no head_dim key)",
          what, c.hidden, c.n_heads);
    c.head_dim = c.hidden / c.n_heads;
  }
  check(c.head_dim % 2 == 0, "{}: head_dim {} must be even (RoPE rotates pairs)", what, c.head_dim);

  c.norm_eps = f.opt_float("rms_norm_eps", 1e-6f);
  c.rope_theta = f.opt_float("rope_theta", 10000.f);
  c.max_position = f.opt_int("max_position_embeddings", def.max_position);
  c.tie_embeddings = f.opt_bool("tie_word_embeddings", false);
  const std::string act = f.opt_string("hidden_act", "silu");
  check(act == "silu", "{}: hidden_act \"{}\" is not supported; expected \"silu\"", what, act);
  for (const BoolFlag& flag : fam.flags()) flag.set(c, f.opt_bool(flag.name, flag.dflt));
  fam.read_config(f, c);
  parse_rope_scaling(f, c, notes);

  c.bos_id = f.has("bos_token_id") ? f.req_int("bos_token_id")
                                   : (f.mentions("bos_token_id") ? -1 : def.bos_id);
  std::vector<int32_t> eos = f.id_list("eos_token_id");
  if (eos.empty() && !f.mentions("eos_token_id") && def.eos_id >= 0) eos.push_back(def.eos_id);
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
  if (const auto llm = internvl_llm_config(j, cfg.string())) {
    c = parse_llm_config(*llm->json, llm->what, notes);
    if (llm->tie_embeddings) c.tie_embeddings = *llm->tie_embeddings;
  } else if (const auto text = nested_text_config(j, cfg.string())) {
    // A VLM that is itself a family's model type (Qwen3.5, Qwen3-VL) keeps its LLM's keys in
    // text_config; tying is the top level's word (transformers ties by it), and the family may
    // read more of the top level (Qwen3-VL: its vision settings).
    c = parse_llm_config(text->config, text->what, notes);
    const JsonFields top(j, cfg.string());
    if (text->tie_embeddings) c.tie_embeddings = *text->tie_embeddings;
    family_named(c.family).read_outer_config(top, c);  // may set its own tying default
  } else {
    c = parse_llm_config(j, cfg.string(), notes);
  }
  const fs::path gen = dir / "generation_config.json";
  if (fs::exists(gen)) {
    const json g = read_json_file(gen);
    const JsonFields gf(g, gen.string());
    add_eos(c, gf.id_list("eos_token_id"));
    if (c.bos_id < 0) c.bos_id = gf.opt_int("bos_token_id", -1);
  }
  return c;
}

}  // namespace edgevl::models
