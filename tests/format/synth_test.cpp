// Random-weight checkpoints: a 1-layer qwen2-0.5b loads back through the same readers a hub
// download goes through, with the real names, shapes and dtype; bytes depend only on seed.
#include "synth/synth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include <stdlib.h>

#include "compiler/compile.h"
#include "compiler/tokenizer_import.h"
#include "core/dtype.h"
#include "core/error.h"
#include "format/checkpoint.h"
#include "format/json_fields.h"
#include "models/internvl.h"
#include "models/llm_config.h"
#include "runtime/execution/model.h"
#include "support/test_paths.h"
#include "text/tokenizer.h"

namespace edgevl {
namespace {

using models::load_llm_config;
using models::parse_llm_config;

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
  EXPECT_EQ(c.family, "qwen2");
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
  c.family = "internlm2";
  c.vocab_size = 92544;
  c.hidden = 2048;
  c.n_layers = 24;
  c.n_heads = 16;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  c.ffn = 8192;
  c.flags.set("bias", 0);  // as its config.json says
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
  c.family = "llama";
  const auto l = synth::hf_llm_tensors(c);
  EXPECT_EQ(l.back().name, "lm_head.weight");
  for (const auto& x : l) EXPECT_EQ(x.name.find(".bias"), std::string::npos) << x.name;
}

TEST(Synth, ArchNamesAndErrors) {
  EXPECT_EQ(synth::synth_arch_names(),
            (std::vector<std::string>{"qwen2-0.5b", "qwen2.5-1.5b", "qwen3-0.6b", "qwen3-1.7b",
                                      "internlm2-1.8b", "llama", "qwen3.5-0.8b", "qwen3-vl-2b",
                                      "internvl2-1b", "internvl2-2b", "internvl2.5-1b",
                                      "internvl3.5-1b", "internvl3.5-2b"}));
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
  // Vision options only make sense for InternVL archs.
  o.layers = 1;
  o.vision_layers = 1;
  EXPECT_THROW(synth::synth_checkpoint(o), Error);
  o.vision_layers = -1;
  o.hf_names = true;
  EXPECT_THROW(synth::synth_checkpoint(o), Error);
  o.arch = "internvl2-1b";
  o.hf_names = false;
  o.vision_layers = 0;
  EXPECT_THROW(synth::synth_checkpoint(o), Error);
}

std::set<std::string> names_of(const std::vector<synth::HfTensor>& t) {
  std::set<std::string> s;
  for (const auto& x : t) s.insert(x.name);
  return s;
}

std::vector<float> values(const Checkpoint& ck, const std::string& name) {
  const TensorView& t = ck.get(name);
  std::vector<float> v(size_t(t.numel()));
  tensor_to_f32(t, v.data());
  return v;
}

// InternVL2-1B with one LLM layer and one vision layer: real names and shapes, a config both
// config readers accept, the InternVL tokens in the tokenizer, and `edgevl compile` output that
// loads with its vision tower.
TEST(Synth, InternVL2_1BLoadsParsesAndCompiles) {
  ScratchDir tmp;
  synth::SynthOptions o;
  o.arch = "internvl2-1b";
  o.layers = 1;
  o.vision_layers = 1;
  o.seed = 5;
  o.out = tmp.path() / "ckpt";
  std::vector<std::string> lines;
  synth::synth_checkpoint(o, [&](const std::string& s) { lines.push_back(s); });
  for (const char* want : {"writing vision_model.encoder.layers.0 (1/1)",
                           "writing language_model.model.layers.0 (1/1)", "writing mlp1.1.weight"})
    EXPECT_NE(std::find(lines.begin(), lines.end(), want), lines.end()) << want;

  const LlmConfig c = load_llm_config(o.out);
  EXPECT_EQ(c.family, "qwen2");
  EXPECT_EQ(c.n_layers, 1);
  EXPECT_EQ(c.hidden, 896);
  EXPECT_EQ(c.n_heads, 14);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.ffn, 4864);
  EXPECT_EQ(c.vocab_size, 151655);
  EXPECT_FALSE(c.tie_embeddings);
  const models::VlmInfo vi = models::load_vlm_info(o.out);
  EXPECT_TRUE(vi.is_vlm);
  EXPECT_EQ(vi.naming, models::VlmNaming::Original);
  EXPECT_EQ(vi.vision_layers, 1);
  EXPECT_EQ(vi.vision.n_layers, 1);
  EXPECT_EQ(vi.vision.hidden, 1024);
  EXPECT_EQ(vi.vision.n_heads, 16);
  EXPECT_EQ(vi.vision.ffn, 4096);
  EXPECT_EQ(vi.vision.image_size, 448);
  EXPECT_EQ(vi.vision.patch_size, 14);
  EXPECT_EQ(vi.vision.shuffle, 2);
  EXPECT_EQ(vi.vision.tokens_per_tile(), 256);
  EXPECT_TRUE(vi.vision_qkv_bias);
  EXPECT_EQ(vi.template_name, "Hermes-2");

  Checkpoint ck(o.out);
  synth::VisionShape vs;
  vs.layers = 1;
  const auto want = synth::hf_internvl_tensors(vs, c, false);
  const auto names = ck.names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), names_of(want));
  for (const auto& t : want) EXPECT_EQ(ck.get(t.name).shape, t.shape) << t.name;
  const std::pair<const char*, std::vector<int64_t>> shapes[] = {
      {"vision_model.embeddings.class_embedding", {1, 1, 1024}},
      {"vision_model.embeddings.patch_embedding.weight", {1024, 3, 14, 14}},
      {"vision_model.embeddings.position_embedding", {1, 1025, 1024}},
      {"vision_model.encoder.layers.0.attn.qkv.weight", {3072, 1024}},
      {"vision_model.encoder.layers.0.attn.qkv.bias", {3072}},
      {"vision_model.encoder.layers.0.ls1", {1024}},
      {"vision_model.encoder.layers.0.mlp.fc1.weight", {4096, 1024}},
      {"mlp1.0.weight", {4096}},
      {"mlp1.1.weight", {896, 4096}},
      {"mlp1.3.weight", {896, 896}},
      {"language_model.model.embed_tokens.weight", {151655, 896}},
      {"language_model.lm_head.weight", {151655, 896}},
      {"language_model.model.layers.0.self_attn.k_proj.bias", {128}},
  };
  for (const auto& [n, shape] : shapes) EXPECT_EQ(ck.get(n).shape, shape) << n;
  for (const auto& n : names) EXPECT_EQ(ck.get(n).dtype, "BF16") << n;

  // Layer scales well away from 0, LayerNorm weights near 1, biases small.
  for (float x : values(ck, "vision_model.encoder.layers.0.ls2")) {
    EXPECT_GE(x, 0.49f);
    EXPECT_LE(x, 1.51f);
  }
  for (float x : values(ck, "vision_model.encoder.layers.0.norm1.weight"))
    EXPECT_NEAR(x, 1.f, 0.1f);
  for (float x : values(ck, "mlp1.0.weight")) EXPECT_NEAR(x, 1.f, 0.1f);
  for (float x : values(ck, "vision_model.encoder.layers.0.norm2.bias")) EXPECT_NEAR(x, 0.f, 0.05f);

  // The tokenizer holds InternVL's tokens at InternVL2-1B's ids, as single special tokens.
  const text::Tokenizer tok(compiler::load_tokenizer_dir(o.out));
  EXPECT_EQ(tok.encode("<img><IMG_CONTEXT></img>"), (std::vector<int32_t>{151646, 151648, 151647}));
  EXPECT_EQ(tok.encode("<box></box><|im_end|>"), (std::vector<int32_t>{151653, 151654, 151645}));

  // `edgevl compile` accepts it; the binary loads with its vision tower.
  compiler::CompileOptions co;
  co.input = o.out;
  co.output = tmp.path() / "m.evb";
  co.quant = "f16";
  co.context = 256;
  compiler::compile_model(co);
  fs::remove_all(o.out);  // keep the scratch space small
  Model m(co.output);
  ASSERT_NE(m.vision(), nullptr);
  EXPECT_EQ(m.vision()->img_context_id, 151648);
  EXPECT_EQ(m.vision()->img_start_id, 151646);
  EXPECT_EQ(m.vision()->img_end_id, 151647);
  EXPECT_EQ(m.vision()->n_layers, 1);
  EXPECT_EQ(m.vision()->llm_hidden, 896);
}

// The transformers-native layout of the same model: model_type internvl, its tensor names.
TEST(Synth, InternVL2_1BHfNames) {
  ScratchDir tmp;
  synth::SynthOptions o;
  o.arch = "internvl2-1b";
  o.layers = 1;
  o.vision_layers = 1;
  o.hf_names = true;
  o.out = tmp.path() / "hf";
  synth::synth_checkpoint(o);
  const LlmConfig c = load_llm_config(o.out);
  EXPECT_EQ(c.family, "qwen2");
  EXPECT_EQ(c.vocab_size, 151655);
  EXPECT_FALSE(c.tie_embeddings);
  const models::VlmInfo vi = models::load_vlm_info(o.out);
  EXPECT_TRUE(vi.is_vlm);
  EXPECT_EQ(vi.naming, models::VlmNaming::TransformersNative);
  EXPECT_EQ(vi.vision.image_size, 448);
  EXPECT_EQ(vi.vision.patch_size, 14);
  EXPECT_EQ(vi.vision_layers, 1);
  EXPECT_EQ(read_json_file(o.out / "config.json")["image_token_id"], 151648);
  Checkpoint ck(o.out);
  synth::VisionShape vs;
  vs.layers = 1;
  const auto want = synth::hf_internvl_tensors(vs, c, true);
  const auto names = ck.names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), names_of(want));
  for (const char* n :
       {"model.vision_tower.embeddings.cls_token",
        "model.vision_tower.embeddings.patch_embeddings.projection.weight",
        "model.vision_tower.encoder.layer.0.attention.q_proj.bias",
        "model.vision_tower.encoder.layer.0.attention.projection_layer.weight",
        "model.vision_tower.encoder.layer.0.lambda_1", "model.multi_modal_projector.linear_2.bias",
        "model.language_model.layers.0.self_attn.q_proj.weight", "lm_head.weight"})
    EXPECT_NE(ck.find(n), nullptr) << n;
  for (float x : values(ck, "model.vision_tower.encoder.layer.0.lambda_1")) EXPECT_GE(x, 0.49f);
  for (float x : values(ck, "model.multi_modal_projector.layer_norm.weight"))
    EXPECT_NEAR(x, 1.f, 0.1f);

  compiler::CompileOptions co;
  co.input = o.out;
  co.output = tmp.path() / "hf.evb";
  co.context = 256;
  compiler::compile_model(co);
  fs::remove_all(o.out);
  Model m(co.output);
  ASSERT_NE(m.vision(), nullptr);
  EXPECT_EQ(m.vision()->img_context_id, 151648);
}

// Full-size tensor lists (no files): InternVL2-2B in both namings.
TEST(Synth, InternVLTensorLists) {
  LlmConfig c;
  c.family = "internlm2";
  c.vocab_size = 92553;
  c.hidden = 2048;
  c.n_layers = 24;
  c.n_heads = 16;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  c.ffn = 8192;
  c.flags.set("bias", 0);      // as internlm2-chat-1_8b's config.json says
  const synth::VisionShape v;  // InternViT-300M: 1024 wide, 24 layers
  const auto t = synth::hf_internvl_tensors(v, c, false);
  EXPECT_EQ(t.size(), 4 + 24 * 14 + 6 + (1 + 24 * 7 + 2u));
  const auto names = names_of(t);
  for (const char* n :
       {"language_model.output.weight", "language_model.model.tok_embeddings.weight",
        "language_model.model.layers.23.attention.wqkv.weight",
        "vision_model.encoder.layers.23.ls2", "mlp1.3.bias"})
    EXPECT_TRUE(names.count(n)) << n;
  int64_t params = 0;
  for (const auto& x : t) {
    int64_t n = 1;
    for (auto d : x.shape) n *= d;
    params += n;
    if (x.name == "mlp1.1.weight") {
      EXPECT_EQ(x.shape, (std::vector<int64_t>{2048, 4096}));
    }
  }
  // InternVL2-2B: 2.21B parameters (InternViT-300M 0.30B + InternLM2-1.8B 1.89B + mlp1).
  EXPECT_NEAR(double(params) / 1e9, 2.21, 0.01);

  const auto h = synth::hf_internvl_tensors(v, c, true);
  EXPECT_EQ(h.size(), 4 + 24 * 18 + 6 + (1 + 24 * 9 + 2u));
  const auto hn = names_of(h);
  for (const char* n : {"lm_head.weight", "model.language_model.embed_tokens.weight",
                        "model.language_model.layers.0.self_attn.k_proj.weight",
                        "model.vision_tower.encoder.layer.23.lambda_2"})
    EXPECT_TRUE(hn.count(n)) << n;
  for (const auto& x : h) {
    if (x.name.rfind("model.language_model.", 0) == 0) {
      EXPECT_EQ(x.name.find(".bias"), std::string::npos) << x.name;
    }
  }
}

// InternVL3.5-1B (InternViT-300M + Qwen3-0.6B), in both namings: Qwen3's per-head q/k norms
// and explicit head_dim in the LLM, InternVL's tokens after Qwen3's 151669, and a compiled
// binary that loads with its vision tower.
TEST(Synth, InternVL35_1BBothNamingsCompile) {
  for (bool hf : {false, true}) {
    ScratchDir tmp;
    synth::SynthOptions o;
    o.arch = "internvl3.5-1b";
    o.layers = 1;
    o.vision_layers = 1;
    o.hf_names = hf;
    o.out = tmp.path() / "ckpt";
    synth::synth_checkpoint(o);
    const LlmConfig c = load_llm_config(o.out);
    EXPECT_EQ(c.family, "qwen3");
    EXPECT_EQ(c.hidden, 1024);
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_EQ(c.n_heads, 16);
    EXPECT_EQ(c.n_kv_heads, 8);
    EXPECT_EQ(c.flags.get_int("attention_bias", -1), 0);
    EXPECT_FALSE(c.tie_embeddings);
    Checkpoint ck(o.out);
    const std::string body = hf ? "model.language_model." : "language_model.model.";
    EXPECT_EQ(ck.get(body + "layers.0.self_attn.q_norm.weight").shape, std::vector<int64_t>{128});
    EXPECT_EQ(ck.get(body + "layers.0.self_attn.q_proj.weight").shape,
              (std::vector<int64_t>{2048, 1024}));
    EXPECT_EQ(ck.find(body + "layers.0.self_attn.q_proj.bias"), nullptr);
    const text::Tokenizer tok(compiler::load_tokenizer_dir(o.out));
    EXPECT_EQ(tok.encode("<img><IMG_CONTEXT></img><think>"),
              (std::vector<int32_t>{151669, 151671, 151670, 151667}));
    if (hf) {
      EXPECT_EQ(read_json_file(o.out / "config.json")["image_token_id"], 151671);
    }

    compiler::CompileOptions co;
    co.input = o.out;
    co.output = tmp.path() / "m.evb";
    // Naming is what differs; quantizing the 2 x 155M-parameter embedding and head once is
    // enough (it took 20 s a naming under the sanitizers).
    co.quant = hf ? "bf16" : "w8a8";
    co.context = 128;
    compiler::compile_model(co);
    fs::remove_all(o.out);
    Model m(co.output);
    EXPECT_EQ(m.config().family, "qwen3");
    EXPECT_EQ(m.config().flags, c.flags);  // the family's flags, stored in the binary
    ASSERT_NE(m.vision(), nullptr);
    EXPECT_EQ(m.vision()->img_context_id, 151671);
    EXPECT_EQ(m.chat_template().name, "internvl2_5") << (hf ? "hf" : "original");
  }
}

}  // namespace
}  // namespace edgevl
