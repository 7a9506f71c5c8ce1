// The model families (src/models): the registry finds them by config.json's names, each
// family's tensor table is consistent with itself, and the compiler accounts for every
// checkpoint tensor (an unused one fails the compile, naming it, unless the family lists it as
// known to be unneeded).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "compiler/compile.h"
#include "core/error.h"
#include "core/temp_dir.h"
#include "format/safetensors.h"
#include "models/llm_config.h"
#include "models/registry.h"
#include "runtime/execution/model.h"
#include "support/test_paths.h"

namespace edgevl::models {
namespace {

namespace fs = std::filesystem;

TEST(Families, RegistryFindsEachByModelTypeAndArchitecture) {
  ASSERT_GE(llm_families().size(), 4u);
  std::set<std::string> names;
  for (const LlmFamily* f : llm_families()) {
    EXPECT_TRUE(names.insert(f->name()).second) << "two families named " << f->name();
    for (const std::string& t : f->model_types()) EXPECT_EQ(find_family(t), f) << t;
    for (const std::string& a : f->architectures()) EXPECT_EQ(find_family("", a), f) << a;
    EXPECT_EQ(&family_named(f->name()), f);
  }
  EXPECT_EQ(find_family("qwen3")->name(), std::string("qwen3"));
  EXPECT_EQ(find_family("", "Qwen3ForCausalLM")->name(), std::string("qwen3"));
  EXPECT_EQ(find_family("gpt2"), nullptr);
  EXPECT_THROW(family_named("gpt2"), Error);
}

LlmConfig small_config(const std::string& family) {
  LlmConfig c;
  c.family = family;
  c.vocab_size = 50;
  c.hidden = 24;
  c.n_layers = 2;
  c.n_heads = 6;
  c.n_kv_heads = 2;
  c.head_dim = 8;  // != hidden / heads, as in Qwen3
  c.ffn = 40;
  return c;
}

// Every table: unique names, positive shapes, layer tensors name their layer; fused tensors
// split into parts that cover each source row exactly once.
TEST(Families, TablesAreConsistent) {
  for (const LlmFamily* f : llm_families()) {
    for (bool bias : {false, true}) {
      LlmConfig c = small_config(f->name());
      for (const BoolFlag& flag : f->flags()) flag.set(c, bias);  // every flag off, then on
      c.tie_embeddings = !bias;
      std::set<std::string> seen;
      int fused = 0;
      for (const TensorDef& t : f->tensors(c)) {
        EXPECT_TRUE(seen.insert(t.name).second) << f->name() << ": duplicate " << t.name;
        for (int64_t d : t.shape) EXPECT_GT(d, 0) << t.name;
        if (t.layer >= 0) {
          EXPECT_NE(t.name.find("layers." + std::to_string(t.layer) + "."), std::string::npos)
              << t.name;
        }
        if (t.slot != Slot::Fused) continue;
        ++fused;
        std::vector<int> covered(size_t(t.shape[0]), 0);
        for (const SplitPart& p : f->split(t, c)) {
          EXPECT_EQ(p.run * p.count, p.rows) << p.name;
          for (int64_t i = 0; i < p.count; ++i)
            for (int64_t r = 0; r < p.run; ++r) ++covered[size_t(p.first + i * p.stride + r)];
        }
        for (size_t r = 0; r < covered.size(); ++r)
          EXPECT_EQ(covered[r], 1) << t.name << " row " << r;
      }
      if (std::string(f->name()) == "internlm2") {
        EXPECT_EQ(fused, bias ? 4 : 2);
      }
      const bool has_head = seen.count("lm_head.weight") || seen.count("output.weight");
      EXPECT_EQ(has_head, !c.tie_embeddings) << f->name();
    }
  }
}

// The llama golden fixture with one more tensor, `name`, in its model.safetensors.
fs::path fixture_with_extra(const TempDir& tmp, const std::string& name) {
  const fs::path src = test::fixtures_dir() / "golden" / "llama", dir = tmp.path() / "ckpt";
  fs::copy(src, dir, fs::copy_options::recursive);
  const SafetensorsFile orig(src / "model.safetensors");
  std::vector<SafetensorsWriter::Entry> entries;
  for (const TensorView& t : orig.tensors()) entries.push_back({t.name, t.dtype, t.shape});
  entries.push_back({name, "F32", {4}});
  SafetensorsWriter w(dir / "model.safetensors", entries);
  for (const TensorView& t : orig.tensors()) w.write(t.data, t.nbytes);
  const float v[4] = {1, 2, 3, 4};
  w.write(v, sizeof v);
  w.finish();
  return dir;
}

std::string compile_error(const fs::path& in, const fs::path& out) {
  compiler::CompileOptions o;
  o.input = in;
  o.output = out;
  o.quant = "f32";
  try {
    compiler::compile_model(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Families, UnusedCheckpointTensorFailsTheCompileNamingIt) {
  TempDir tmp;
  const fs::path dir = fixture_with_extra(tmp, "model.layers.1.mlp.down_proj.bias");
  const std::string err = compile_error(dir, tmp.path() / "m.evb");
  EXPECT_NE(err.find("1 checkpoint tensor(s) would be ignored"), std::string::npos) << err;
  EXPECT_NE(err.find("model.layers.1.mlp.down_proj.bias"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(tmp.path() / "m.evb"));
}

TEST(Families, KnownUnneededTensorsAreAllowed) {
  TempDir tmp;
  // Saved by transformers < 4.31 beside Llama weights; RoPE is recomputed.
  const fs::path dir = fixture_with_extra(tmp, "model.layers.0.self_attn.rotary_emb.inv_freq");
  EXPECT_EQ(compile_error(dir, tmp.path() / "m.evb"), "");
  EXPECT_NO_THROW(Model(tmp.path() / "m.evb"));
}

// A config flag the family does not implement is refused, naming it.
TEST(Families, UnimplementedFlagsAreRefused) {
  nlohmann::json j = {{"model_type", "qwen3"},     {"vocab_size", 10},
                      {"hidden_size", 8},          {"num_hidden_layers", 1},
                      {"num_attention_heads", 2},  {"intermediate_size", 16},
                      {"use_sliding_window", true}};
  try {
    parse_llm_config(j, "c");
    FAIL() << "accepted use_sliding_window";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use_sliding_window"), std::string::npos);
  }
  j["use_sliding_window"] = false;
  j["layer_types"] = {"sliding_attention"};
  EXPECT_THROW(parse_llm_config(j, "c"), Error);
  j.erase("layer_types");
  const LlmConfig c = parse_llm_config(j, "c");
  EXPECT_EQ(c.head_dim, 128);  // Qwen3Config's default, not hidden / heads
  std::set<std::string> names;
  for (const TensorDef& t : find_family("qwen3")->tensors(c)) names.insert(t.name);
  EXPECT_TRUE(names.count("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_FALSE(names.count("model.layers.0.self_attn.q_proj.bias"));
}

}  // namespace
}  // namespace edgevl::models
