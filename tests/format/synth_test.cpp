// Random-weight checkpoints: a 1-layer qwen2-0.5b loads back through the same readers a hub
// download goes through, with the real names, shapes and dtype; bytes depend only on seed.
#include "compiler/synth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include <stdlib.h>

#include "core/dtype.h"
#include "core/error.h"
#include "format/checkpoint.h"
#include "format/hf_config.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

namespace fs = std::filesystem;

// Each run writes ~290 MB (the real 151936 x 896 embedding): a RAM-backed directory keeps the
// test from waiting on disk writeback when one exists.
class ScratchDir {
 public:
  ScratchDir() {
    std::string t = "/dev/shm/edgevl-synth-XXXXXX";
    if (fs::is_directory("/dev/shm") && ::mkdtemp(t.data())) path_ = t;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_.empty() ? fallback_.path() : path_; }

 private:
  test::TempDir fallback_;
  fs::path path_;
};

TEST(Synth, Qwen2OneLayerLoadsBackWithRealNamesAndShapes) {
  ScratchDir tmp;
  synth::SynthOptions o;
  o.arch = "qwen2-0.5b";
  o.layers = 1;
  o.seed = 7;
  o.out = tmp.path() / "a";
  std::vector<std::string> lines;
  synth::synth_checkpoint(o, [&](const std::string& s) { lines.push_back(s); });
  EXPECT_NE(std::find(lines.begin(), lines.end(), "writing model.layers.0 (1/1)"), lines.end());

  EXPECT_TRUE(fs::exists(o.out / "generation_config.json"));
  EXPECT_TRUE(fs::exists(o.out / "tokenizer_config.json"));  // from synth_tokenizer
  const LlmConfig c = load_llm_config(o.out);
  EXPECT_EQ(c.arch, Arch::Qwen2);
  EXPECT_EQ(c.n_layers, 1);
  EXPECT_EQ(c.hidden, 896);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_TRUE(c.tie_embeddings);

  Checkpoint ck(o.out);
  const std::set<std::string> want = {
      "model.embed_tokens.weight",
      "model.norm.weight",
      "model.layers.0.input_layernorm.weight",
      "model.layers.0.post_attention_layernorm.weight",
      "model.layers.0.self_attn.q_proj.weight",
      "model.layers.0.self_attn.q_proj.bias",
      "model.layers.0.self_attn.k_proj.weight",
      "model.layers.0.self_attn.k_proj.bias",
      "model.layers.0.self_attn.v_proj.weight",
      "model.layers.0.self_attn.v_proj.bias",
      "model.layers.0.self_attn.o_proj.weight",
      "model.layers.0.mlp.gate_proj.weight",
      "model.layers.0.mlp.up_proj.weight",
      "model.layers.0.mlp.down_proj.weight",
  };
  const auto names = ck.names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), want);
  EXPECT_EQ(ck.get("model.embed_tokens.weight").shape, (std::vector<int64_t>{151936, 896}));
  EXPECT_EQ(ck.get("model.layers.0.self_attn.q_proj.weight").shape,
            (std::vector<int64_t>{896, 896}));
  EXPECT_EQ(ck.get("model.layers.0.self_attn.k_proj.weight").shape,
            (std::vector<int64_t>{128, 896}));
  EXPECT_EQ(ck.get("model.layers.0.self_attn.v_proj.bias").shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(ck.get("model.layers.0.mlp.down_proj.weight").shape, (std::vector<int64_t>{896, 4864}));
  for (const auto& n : names) EXPECT_EQ(ck.get(n).dtype, "BF16") << n;

  // Norms near 1, weights around N(0, 0.02).
  const TensorView& norm = ck.get("model.norm.weight");
  std::vector<float> v(size_t(norm.numel()));
  tensor_to_f32(norm, v.data());
  for (float x : v) EXPECT_NEAR(x, 1.f, 0.1f);
  const TensorView& w = ck.get("model.layers.0.mlp.up_proj.weight");
  std::vector<float> wv(size_t(w.numel()));
  tensor_to_f32(w, wv.data());
  double s = 0, s2 = 0;
  for (float x : wv) s += x, s2 += double(x) * x;
  const double mean = s / double(wv.size()), sd = std::sqrt(s2 / double(wv.size()) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(sd, 0.02, 1e-3);

  // The values depend only on (seed, tensor name): an f16 run with the same seed holds the
  // same numbers, up to each format's rounding. (Two runs only: each writes ~290 MB.)
  o.out = tmp.path() / "b";
  o.dtype = "f16";
  synth::synth_checkpoint(o);
  Checkpoint cb(o.out);
  const TensorView& w16 = cb.get("model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(w16.dtype, "F16");
  std::vector<float> wv16(size_t(w16.numel()));
  tensor_to_f32(w16, wv16.data());
  for (size_t i = 0; i < wv.size(); i += 4099) EXPECT_NEAR(wv16[i], wv[i], 1e-3f) << i;
}

TEST(Synth, TensorListsOfOtherArchitectures) {
  // InternLM2-chat-1.8B: fused grouped wqkv [(16 + 2*8) * 128, 2048], untied `output`.
  LlmConfig c;
  c.arch = Arch::InternLM2;
  c.vocab_size = 92544;
  c.hidden = 2048;
  c.n_layers = 24;
  c.n_heads = 16;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  c.ffn = 8192;
  const auto t = synth::hf_llm_tensors(c);
  EXPECT_EQ(t.size(), 1 + 24 * 7 + 2u);
  EXPECT_EQ(t.front().name, "model.tok_embeddings.weight");
  EXPECT_EQ(t.back().name, "output.weight");
  EXPECT_EQ(t[1].name, "model.layers.0.attention.wqkv.weight");
  EXPECT_EQ(t[1].shape, (std::vector<int64_t>{4096, 2048}));
  EXPECT_EQ(t[2].name, "model.layers.0.attention.wo.weight");
  EXPECT_EQ(t[3].name, "model.layers.0.feed_forward.w1.weight");
  EXPECT_EQ(t[5].shape, (std::vector<int64_t>{2048, 8192}));  // w2
  EXPECT_EQ(t[6].name, "model.layers.0.attention_norm.weight");
  EXPECT_EQ(t[7].name, "model.layers.0.ffn_norm.weight");
  // Llama untied: lm_head present, no biases.
  c.arch = Arch::Llama;
  const auto l = synth::hf_llm_tensors(c);
  EXPECT_EQ(l.back().name, "lm_head.weight");
  for (const auto& x : l) EXPECT_EQ(x.name.find(".bias"), std::string::npos) << x.name;
}

TEST(Synth, ArchNamesAndErrors) {
  EXPECT_EQ(synth::synth_arch_names(),
            (std::vector<std::string>{"qwen2-0.5b", "qwen2.5-1.5b", "internlm2-1.8b", "llama"}));
  test::TempDir tmp;
  synth::SynthOptions o;
  o.out = tmp.path();
  o.arch = "gpt2";
  try {
    synth::synth_checkpoint(o);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected one of qwen2-0.5b"), std::string::npos);
  }
  o.arch = "llama";
  o.dtype = "q4";
  EXPECT_THROW(synth::synth_checkpoint(o), Error);
  o.dtype = "bf16";
  o.layers = 0;
  EXPECT_THROW(synth::synth_checkpoint(o), Error);
}

}  // namespace
}  // namespace edgevl
