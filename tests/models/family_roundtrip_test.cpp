// Every registered family, from nothing but its own tensor table: a tiny config.json, random
// weights for exactly the tensors the table lists, a tokenizer — then `compile` accepts it (no
// tensor missing, none unused) and the binary runs. A family added to the registry is tested
// here without editing this file.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "compiler/compile.h"
#include "core/temp_dir.h"
#include "format/safetensors.h"
#include "models/llm_config.h"
#include "models/registry.h"
#include "runtime/execution/model.h"
#include "runtime/execution/session.h"
#include "synth/synth_tokenizer.h"

namespace edgevl::models {
namespace {

namespace fs = std::filesystem;

nlohmann::json tiny_config(const LlmFamily& f, bool options_on) {
  nlohmann::json j = {{"model_type", f.model_types()[0]},
                      {"architectures", {f.architectures()[0]}},
                      {"vocab_size", 320},
                      {"hidden_size", 32},
                      {"num_hidden_layers", 2},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"intermediate_size", 48},
                      {"max_position_embeddings", 256},
                      {"head_dim", 16},  // != 32 / 4, where the family honours the key
                      {"tie_word_embeddings", !options_on}};
  if (options_on) {  // every optional tensor a family's flags can ask for
    j["attention_bias"] = true;
    j["mlp_bias"] = true;
    j["bias"] = true;
  }
  return j;
}

void write_checkpoint(const fs::path& dir, const LlmFamily& f, const nlohmann::json& cfg_json) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << cfg_json.dump(2);
  const LlmConfig c = parse_llm_config(cfg_json, "tiny " + std::string(f.name()));
  std::vector<SafetensorsWriter::Entry> entries;
  const std::vector<TensorDef> table = f.tensors(c);
  for (const TensorDef& t : table) entries.push_back({t.name, "F32", t.shape});
  SafetensorsWriter w(dir / "model.safetensors", entries);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 0.1f);
  for (const TensorDef& t : table) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = (t.role == WeightRole::Norm ? 1.f : 0.f) + nd(rng);
    w.write(v.data(), v.size() * sizeof(float));
  }
  w.finish();
  synth::write_bytelevel_bpe_tokenizer(dir, c.vocab_size);
}

TEST(FamilyRoundTrip, EveryFamilyCompilesFromItsOwnTableAndRuns) {
  for (const LlmFamily* f : llm_families()) {
    for (bool options_on : {false, true}) {
      SCOPED_TRACE(std::string(f->name()) + (options_on ? " with options" : ""));
      TempDir tmp;
      const nlohmann::json cfg = tiny_config(*f, options_on);
      write_checkpoint(tmp.path() / "ckpt", *f, cfg);
      compiler::CompileOptions o;
      o.input = tmp.path() / "ckpt";
      o.output = tmp.path() / "m.evb";
      o.quant = "f32";
      o.context = 64;
      ASSERT_NO_THROW(compiler::compile_model(o));
      const Model m(o.output);
      EXPECT_EQ(m.config().family, f->name());
      // The family's flags as config.json set them, through the binary.
      EXPECT_EQ(m.config().flags, parse_llm_config(cfg, "tiny").flags);
      // Each declared flag is stored (a family may store more settings its read_config
      // reads, such as Qwen3-VL's MRoPE sections).
      for (const BoolFlag& flag : f->flags()) EXPECT_TRUE(m.config().flags.has(flag.name));
      Session s(m, SessionOptions{1, 0});
      const std::vector<int32_t> ids = {5, 17, 42, 99};
      const auto logits = s.eval_tokens(ids);
      ASSERT_EQ(logits.size(), size_t(m.config().vocab_size));
      for (float x : logits) ASSERT_TRUE(std::isfinite(x));
    }
  }
}

}  // namespace
}  // namespace edgevl::models
