// config.json parsing for the supported families, with real hub configs, and the errors a
// user meets (unsupported model_type, missing keys, unsupported rope scaling, bad JSON).
#include "format/json_fields.h"
#include "models/llm_config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "models/registry.h"
#include "support/test_paths.h"
#include "support/test_util.h"

namespace edgevl {
namespace {

using models::load_llm_config;
using models::parse_llm_config;

namespace fs = std::filesystem;
using nlohmann::json;

using test::error_of;

// Whether the family's tensor table for `c` lists `name`: what its flags decide (biases, norms).
bool table_has(const LlmConfig& c, const std::string& name) {
  for (const models::TensorDef& t : models::family_named(c.family).tensors(c))
    if (t.name == name) return true;
  return false;
}

// Qwen/Qwen2-0.5B config.json as published.
const char* kQwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu",
  "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864,
  "max_position_embeddings": 131072, "max_window_layers": 24, "model_type": "qwen2",
  "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.40.1",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// internlm/internlm2-chat-1_8b config.json (auto_map omitted).
const char* kInternLM2 = R"({
  "architectures": ["InternLM2ForCausalLM"], "attn_implementation": "eager", "bias": false,
  "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 2048,
  "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 32768,
  "model_type": "internlm2", "num_attention_heads": 16, "num_hidden_layers": 24,
  "num_key_value_heads": 8, "pad_token_id": 2, "rms_norm_eps": 1e-05,
  "rope_scaling": {"type": "dynamic", "factor": 2.0}, "rope_theta": 1000000,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 92544})";

TEST(HfConfig, Qwen2) {
  const LlmConfig c = parse_llm_config(json::parse(kQwen2), "config.json");
  EXPECT_EQ(c.family, "qwen2");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden, 896);
  EXPECT_EQ(c.n_layers, 24);
  EXPECT_EQ(c.n_heads, 14);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.ffn, 4864);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.max_position, 131072);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_TRUE(table_has(c, "model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(table_has(c, "model.layers.0.self_attn.o_proj.bias"));
  EXPECT_FALSE(table_has(c, "model.layers.0.mlp.up_proj.bias"));
  EXPECT_TRUE(c.flags.items().empty());  // Qwen2's q/k/v bias is no flag: always there
  EXPECT_EQ(c.bos_id, 151643);
  EXPECT_EQ(c.eos_id, 151643);
  EXPECT_TRUE(c.extra_eos_ids.empty());
}

TEST(HfConfig, InternLM2WithGenerationConfigAndDynamicRope) {
  test::TempDir tmp;
  std::ofstream(tmp.path() / "config.json") << kInternLM2;
  std::ofstream(tmp.path() / "generation_config.json")
      << R"({"bos_token_id": 1, "eos_token_id": [2, 92542], "pad_token_id": 2})";
  std::vector<std::string> notes;
  const LlmConfig c = load_llm_config(tmp.path(), &notes);
  EXPECT_EQ(c.family, "internlm2");
  EXPECT_EQ(c.hidden, 2048);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.flags.get_int("bias", -1), 0);  // "bias": false
  EXPECT_FALSE(table_has(c, "model.layers.0.attention.wqkv.bias"));
  EXPECT_FALSE(table_has(c, "model.layers.0.attention.wo.bias"));
  EXPECT_EQ(c.eos_id, 2);
  EXPECT_EQ(c.extra_eos_ids, (std::vector<int32_t>{92542}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("dynamic"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("32768"), std::string::npos) << notes[0];
}

TEST(HfConfig, FamilyDefaults) {
  // InternLM2Config defaults bias=True; every family defaults to untied embeddings and
  // num_key_value_heads = num_attention_heads.
  json j = {{"model_type", "internlm2"}, {"vocab_size", 100},        {"hidden_size", 64},
            {"num_hidden_layers", 2},    {"num_attention_heads", 4}, {"intermediate_size", 128}};
  LlmConfig c = parse_llm_config(j, "x");
  EXPECT_EQ(c.flags.get_int("bias", -1), 1);
  EXPECT_TRUE(table_has(c, "model.layers.0.attention.wqkv.bias"));
  EXPECT_TRUE(table_has(c, "model.layers.0.attention.wo.bias"));
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.f);
  EXPECT_EQ(c.bos_id, 1);
  EXPECT_EQ(c.eos_id, 2);
  j["model_type"] = "llama";
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  j["head_dim"] = 32;
  c = parse_llm_config(j, "x");
  EXPECT_EQ(c.family, "llama");
  EXPECT_EQ(c.flags.get_int("attention_bias", -1), 1);
  EXPECT_EQ(c.flags.get_int("mlp_bias", -1), 1);
  for (const char* b : {"self_attn.q_proj", "self_attn.o_proj", "mlp.down_proj"})
    EXPECT_TRUE(table_has(c, "model.layers.1." + std::string(b) + ".bias")) << b;
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_FALSE(c.tie_embeddings);
  j["model_type"] = "qwen2";
  j["num_key_value_heads"] = nullptr;  // null means default, as in transformers
  c = parse_llm_config(j, "x");
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.max_position, 32768);
  EXPECT_EQ(c.eos_id, -1);
}

TEST(HfConfig, UnknownModelTypeListsSupportedOnes) {
  json j = json::parse(kQwen2);
  j["model_type"] = "gpt2";
  const std::string m = error_of([&] { parse_llm_config(j, "/m/config.json"); });
  EXPECT_NE(m.find("/m/config.json"), std::string::npos) << m;
  EXPECT_NE(m.find("model_type 'gpt2' is not supported"), std::string::npos) << m;
  EXPECT_NE(m.find("qwen2, qwen3, internlm2, llama"), std::string::npos) << m;  // registry order
}

TEST(HfConfig, MissingRequiredKeyNamesKeyAndFile) {
  test::TempDir tmp;
  json j = json::parse(kQwen2);
  j.erase("hidden_size");
  std::ofstream(tmp.path() / "config.json") << j.dump();
  const std::string m = error_of([&] { load_llm_config(tmp.path()); });
  EXPECT_NE(m.find((tmp.path() / "config.json").string()), std::string::npos) << m;
  EXPECT_NE(m.find("missing required key 'hidden_size'"), std::string::npos) << m;
  const std::string n = error_of([&] { load_llm_config(tmp.path() / "nowhere"); });
  EXPECT_NE(n.find("config.json: missing"), std::string::npos) << n;
}

TEST(HfConfig, WrongTypesAndShapesAreErrors) {
  json j = json::parse(kQwen2);
  j["num_hidden_layers"] = "24";
  EXPECT_NE(error_of([&] { parse_llm_config(j, "c"); }).find("'num_hidden_layers'"),
            std::string::npos);
  j = json::parse(kQwen2);
  j["num_key_value_heads"] = 3;
  EXPECT_NE(error_of([&] { parse_llm_config(j, "c"); }).find("not a multiple"), std::string::npos);
  j = json::parse(kQwen2);
  j["hidden_act"] = "gelu";
  EXPECT_NE(error_of([&] { parse_llm_config(j, "c"); }).find("hidden_act"), std::string::npos);
  j = json::parse(kQwen2);
  j["use_sliding_window"] = true;
  EXPECT_NE(error_of([&] { parse_llm_config(j, "c"); }).find("use_sliding_window"),
            std::string::npos);
}

TEST(HfConfig, RopeScaling) {
  json j = json::parse(kQwen2);
  j["rope_scaling"] = nullptr;
  EXPECT_NO_THROW(parse_llm_config(j, "c"));
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  std::string m = error_of([&] { parse_llm_config(j, "c"); });
  EXPECT_NE(m.find("rope_scaling type 'yarn' is not supported"), std::string::npos) << m;
  j = json::parse(kInternLM2);
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  m = error_of([&] { parse_llm_config(j, "c"); });
  EXPECT_NE(m.find("'linear' is not supported"), std::string::npos) << m;
  // transformers 5 spelling: theta inside rope_parameters.
  j = json::parse(kQwen2);
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_theta", 5e5}, {"rope_type", "default"}};
  EXPECT_FLOAT_EQ(parse_llm_config(j, "c").rope_theta, 5e5f);
}

TEST(HfConfig, InternVLWrapperUsesNestedLlmConfig) {
  test::TempDir tmp;
  json llm = json::parse(kQwen2);
  json j = {{"model_type", "internvl_chat"}, {"template", "Hermes-2"}, {"llm_config", llm}};
  std::ofstream(tmp.path() / "config.json") << j.dump();
  const LlmConfig c = load_llm_config(tmp.path());
  EXPECT_EQ(c.family, "qwen2");
  EXPECT_EQ(c.hidden, 896);
  EXPECT_FALSE(c.tie_embeddings);  // InternVLChatConfig forces untied
  // parse_llm_config on the wrapper itself points at the nested object.
  const std::string m = error_of([&] { parse_llm_config(j, "w"); });
  EXPECT_NE(m.find("llm_config"), std::string::npos) << m;
}

// Qwen3-VL: the LLM in text_config (model_type qwen3_vl_text), tying at the top level, the
// MRoPE sections in rope_parameters (transformers 5) or rope_scaling with a top-level
// rope_theta (4.57, as the published files are); both load the same.
TEST(HfConfig, Qwen3VlNestedTextConfigInBothRopeSpellings) {
  const json fixture = read_json_file(test::fixtures_dir() / "golden" / "qwen3vl" / "config.json");
  json old_form = fixture;
  json& tc = old_form["text_config"];
  tc["rope_theta"] = tc["rope_parameters"]["rope_theta"];
  tc["rope_scaling"] = {
      {"rope_type", "default"}, {"mrope_section", {6, 5, 5}}, {"mrope_interleaved", true}};
  tc.erase("rope_parameters");
  for (const json& j : {fixture, old_form}) {
    test::TempDir tmp;
    std::ofstream(tmp.path() / "config.json") << j.dump();
    const LlmConfig c = load_llm_config(tmp.path());
    EXPECT_EQ(c.family, "qwen3_vl");
    EXPECT_EQ(c.n_layers, 3);
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_FLOAT_EQ(c.rope_theta, 5e6f);
    EXPECT_TRUE(c.tie_embeddings);  // the top level's key
    EXPECT_EQ(c.flags.get_int("mrope_section_h", -1), 5);
    EXPECT_EQ(c.flags.get_int("mrope_section_w", -1), 5);
    EXPECT_TRUE(table_has(c, "model.language_model.layers.2.self_attn.q_norm.weight"));
    EXPECT_FALSE(table_has(c, "lm_head.weight"));
  }
  // No mrope_section: transformers' default [24, 20, 20]; no top-level tying key: untied.
  json bare = fixture;
  bare["text_config"]["rope_parameters"].erase("mrope_section");
  bare.erase("tie_word_embeddings");
  test::TempDir tmp;
  std::ofstream(tmp.path() / "config.json") << bare.dump();
  const LlmConfig c = load_llm_config(tmp.path());
  EXPECT_EQ(c.flags.get_int("mrope_section_h", -1), 20);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_TRUE(table_has(c, "lm_head.weight"));
  bare["text_config"]["rope_parameters"]["mrope_section"] = {24, 20};
  std::ofstream(tmp.path() / "config.json") << bare.dump();
  const std::string m = error_of([&] { load_llm_config(tmp.path()); });
  EXPECT_NE(m.find("mrope_section"), std::string::npos) << m;
}

TEST(HfConfig, ReadJsonFileReportsByteOffset) {
  test::TempDir tmp;
  const fs::path p = tmp.path() / "bad.json";
  std::ofstream(p) << "{\"a\": 1,\n \"b\": }";
  const std::string m = error_of([&] { read_json_file(p); });
  EXPECT_NE(m.find(p.string() + ": invalid JSON at byte offset 15"), std::string::npos) << m;
}

}  // namespace
}  // namespace edgevl
