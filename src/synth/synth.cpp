#include "synth/synth.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "format/safetensors.h"
#include "models/llm_config.h"
#include "models/registry.h"
#include "synth/qwen3_configs.h"
#include "synth/synth_internvl.h"
#include "synth/synth_tokenizer.h"
#include "synth/text_file.h"

namespace edgevl::synth {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

enum class TokKind { ByteLevelBpe, SentencePieceLlama, SentencePieceInternLM2 };

struct ArchSpec {
  ojson config;      // config.json as published (key order included)
  ojson generation;  // generation_config.json as published
  TokKind tok;
};

std::string all_arch_names();

// Published configs, key for key: Qwen/Qwen2-0.5B, Qwen/Qwen2.5-1.5B-Instruct (the LLM of
// InternVL3-2B), internlm/internlm2-chat-1_8b (the LLM of InternVL2-2B) and
// TinyLlama/TinyLlama-1.1B-Chat-v1.0 (a llama-2-style shape with GQA).
ArchSpec arch_spec(const std::string& name) {
  if (name == "qwen2-0.5b") {
    return {ojson::parse(R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 131072,
  "max_window_layers": 24,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 131072,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})"),
            ojson::parse(R"({
  "bos_token_id": 151643,
  "do_sample": false,
  "eos_token_id": 151643,
  "max_new_tokens": 2048,
  "transformers_version": "4.37.0"
})"),
            TokKind::ByteLevelBpe};
  }
  if (name == "qwen2.5-1.5b") {
    return {ojson::parse(R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 1536,
  "initializer_range": 0.02,
  "intermediate_size": 8960,
  "max_position_embeddings": 32768,
  "max_window_layers": 21,
  "model_type": "qwen2",
  "num_attention_heads": 12,
  "num_hidden_layers": 28,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})"),
            ojson::parse(R"({
  "bos_token_id": 151643,
  "pad_token_id": 151643,
  "do_sample": true,
  "eos_token_id": [151645, 151643],
  "repetition_penalty": 1.1,
  "temperature": 0.7,
  "top_p": 0.8,
  "top_k": 20,
  "transformers_version": "4.37.0"
})"),
            TokKind::ByteLevelBpe};
  }
  if (name == "qwen3-0.6b" || name == "qwen3-1.7b")
    return {qwen3_config(name), qwen3_generation_config(), TokKind::ByteLevelBpe};
  if (name == "internlm2-1.8b") {
    return {ojson::parse(R"({
  "architectures": ["InternLM2ForCausalLM"],
  "attn_implementation": "eager",
  "auto_map": {
    "AutoConfig": "configuration_internlm2.InternLM2Config",
    "AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM",
    "AutoModel": "modeling_internlm2.InternLM2ForCausalLM"
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
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "type": "dynamic",
    "factor": 2.0
  },
  "rope_theta": 1000000,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.41.0",
  "use_cache": true,
  "vocab_size": 92544
})"),
            ojson::parse(R"({
  "bos_token_id": 1,
  "eos_token_id": [2, 92542],
  "pad_token_id": 2,
  "transformers_version": "4.41.0"
})"),
            TokKind::SentencePieceInternLM2};
  }
  if (name == "llama") {
    return {ojson::parse(R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 5632,
  "max_position_embeddings": 2048,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 22,
  "num_key_value_heads": 4,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.35.0",
  "use_cache": true,
  "vocab_size": 32000
})"),
            ojson::parse(R"({
  "bos_token_id": 1,
  "eos_token_id": 2,
  "max_length": 2048,
  "pad_token_id": 0,
  "transformers_version": "4.35.0"
})"),
            TokKind::SentencePieceLlama};
  }
  fail("synth: unknown architecture '{}'; expected one of {}", name, all_arch_names());
}

// xoshiro256** seeded through splitmix64: fast, and the stream of each tensor depends only
// on (seed, tensor name), so the bytes do not depend on write order.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      w = z ^ (z >> 31);
    }
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Bell-shaped values from one 64-bit draw: the sum of four uniform 16-bit numbers
// (Irwin-Hall, n = 4) is close to normal, far cheaper than Box-Muller, and bounded at 3.5
// sigma, which suits weights.
inline float approx_normal(uint64_t r) {
  const uint32_t s = uint32_t(r & 0xffff) + uint32_t((r >> 16) & 0xffff) +
                     uint32_t((r >> 32) & 0xffff) + uint32_t(r >> 48);
  constexpr float kMean = 2.f * 65535.f;
  constexpr float kInvStd = 1.f / 37837.23f;  // sqrt(4 * (65536^2 - 1) / 12)
  return (float(s) - kMean) * kInvStd;
}

struct DtypeInfo {
  std::string st;     // safetensors dtype
  std::string torch;  // config.json torch_dtype
  size_t size;
};

DtypeInfo dtype_info(const std::string& d) {
  if (d == "bf16") return {"BF16", "bfloat16", 2};
  if (d == "f16") return {"F16", "float16", 2};
  if (d == "f32") return {"F32", "float32", 4};
  fail("synth: dtype '{}' is not supported; expected bf16, f16 or f32", d);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// How a tensor's values are drawn, by its name.
enum class Init { Weight, Norm, Bias, LayerScale };

Init init_of(const std::string& name) {
  // InternViT layer scales (ls1/ls2, lambda_1/lambda_2): trained ones sit well away from 0.
  if (ends_with(name, ".ls1") || ends_with(name, ".ls2") || ends_with(name, ".lambda_1") ||
      ends_with(name, ".lambda_2"))
    return Init::LayerScale;
  const bool norm = name.find("norm") != std::string::npos || name.rfind("mlp1.0.", 0) == 0;
  if (ends_with(name, ".bias")) return Init::Bias;
  return norm ? Init::Norm : Init::Weight;
}

// Streams random values for `tensors` into a safetensors file. Weights ~ N(0, 0.02), norm
// weights ~ 1 + N(0, 0.02), biases ~ N(0, 0.01), layer scales ~ U(0.5, 1.5). Each tensor's
// values depend only on (seed, name).
void write_random_safetensors(const fs::path& path, const std::vector<HfTensor>& tensors,
                              const DtypeInfo& dt, uint64_t seed,
                              const std::function<void(const std::string&)>& say) {
  std::vector<SafetensorsWriter::Entry> entries;
  entries.reserve(tensors.size());
  for (const auto& t : tensors) entries.push_back({t.name, dt.st, t.shape});
  SafetensorsWriter w(path, std::move(entries), {{"format", "pt"}});

  // Progress: one line per layer ("writing model.layers.3 (4/24)"), one per other tensor.
  auto layer_group = [](const std::string& name, std::string* prefix, int* layer) {
    for (const char* key : {".layers.", ".layer."}) {
      size_t at = name.find(key);
      if (at == std::string::npos) continue;
      const size_t num = at + std::strlen(key);
      size_t end = num;
      while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
      if (end == num || end >= name.size() || name[end] != '.') continue;
      *prefix = name.substr(0, at + std::strlen(key) - 1);
      *layer = std::stoi(name.substr(num, end - num));
      return true;
    }
    return false;
  };
  std::map<std::string, int> n_layers;
  for (const auto& t : tensors) {
    std::string prefix;
    int layer = -1;
    if (layer_group(t.name, &prefix, &layer))
      n_layers[prefix] = std::max(n_layers[prefix], layer + 1);
  }

  constexpr size_t kChunk = size_t(1) << 20;  // elements per write
  std::vector<float> vals(kChunk);
  std::vector<uint8_t> bytes(kChunk * dt.size);
  std::string last_group;
  for (const auto& t : tensors) {
    std::string prefix;
    int layer = -1;
    if (layer_group(t.name, &prefix, &layer)) {
      const std::string group = fmt::format("{}.{}", prefix, layer);
      if (group != last_group)
        say(fmt::format("writing {} ({}/{})", group, layer + 1, n_layers[prefix]));
      last_group = group;
    } else {
      say("writing " + t.name);
      last_group.clear();
    }
    const Init init = init_of(t.name);
    const float mean = init == Init::Norm ? 1.f : 0.f;
    const float sd = init == Init::Bias ? 0.01f : 0.02f;
    Rng rng(seed ^ fnv1a(t.name));
    int64_t left = 1;
    for (int64_t dim : t.shape) left *= dim;
    while (left > 0) {
      const size_t n = size_t(std::min<int64_t>(left, int64_t(kChunk)));
      if (init == Init::LayerScale) {
        for (size_t i = 0; i < n; ++i)
          vals[i] = 0.5f + float(rng.next() >> 40) * (1.f / float(uint64_t(1) << 24));
      } else {
        for (size_t i = 0; i < n; ++i) vals[i] = mean + sd * approx_normal(rng.next());
      }
      if (dt.st == "BF16") {
        auto* out = reinterpret_cast<uint16_t*>(bytes.data());
        for (size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(vals[i]);
      } else if (dt.st == "F16") {
        auto* out = reinterpret_cast<uint16_t*>(bytes.data());
        for (size_t i = 0; i < n; ++i) out[i] = f32_to_f16(vals[i]);
      } else {
        std::memcpy(bytes.data(), vals.data(), n * 4);
      }
      w.write(bytes.data(), n * dt.size);
      left -= int64_t(n);
    }
  }
  w.finish();
}

std::string all_arch_names() {
  std::string names;
  for (const auto& n : synth_arch_names()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

void make_dir(const fs::path& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  check(!ec, "synth: cannot create {}: {}", out.string(), ec.message());
}

// InternVL: config (original or -hf naming), vision + projector + LLM weights, the LLM's
// tokenizer plus InternVL's added tokens.
void synth_internvl(const SynthOptions& o, const DtypeInfo& dt,
                    const std::function<void(const std::string&)>& say) {
  detail::VlmArch a = detail::internvl_arch(o.arch);
  ojson& llm = a.config["llm_config"];
  ojson& vis = a.config["vision_config"];
  if (o.layers != -1) llm["num_hidden_layers"] = o.layers;
  if (o.vision_layers != -1) {
    check(o.vision_layers >= 1,
          "synth: vision_layers = {} must be at least 1 (or -1 for the real count)",
          o.vision_layers);
    vis["num_hidden_layers"] = o.vision_layers;
  }
  a.config["torch_dtype"] = llm["torch_dtype"] = vis["torch_dtype"] = dt.torch;
  if (dt.torch != "bfloat16") llm["use_bfloat16"] = vis["use_bfloat16"] = false;
  const LlmConfig cfg = models::parse_llm_config(nlohmann::json::parse(llm.dump()),
                                                 "synth " + o.arch + " llm_config");
  VisionShape v;
  v.hidden = vis["hidden_size"].get<int64_t>();
  v.layers = vis["num_hidden_layers"].get<int64_t>();
  v.ffn = vis["intermediate_size"].get<int64_t>();
  v.image = vis["image_size"].get<int64_t>();
  v.patch = vis["patch_size"].get<int64_t>();
  v.shuffle = int64_t(1.0 / a.config["downsample_ratio"].get<double>() + 0.5);

  make_dir(o.out);
  const ojson config = o.hf_names ? detail::to_hf_config(a.config, a.llm) : a.config;
  write_text_file(o.out / "config.json", config.dump(2) + "\n");
  write_text_file(o.out / "generation_config.json", a.generation.dump(2) + "\n");
  write_random_safetensors(o.out / "model.safetensors", hf_internvl_tensors(v, cfg, o.hf_names), dt,
                           o.seed, say);

  say("writing tokenizer");
  const int32_t base = detail::base_tokenizer_size(a.llm);
  if (a.llm == detail::VlmLlm::InternLM2)
    write_sentencepiece_tokenizer(o.out, base, true);
  else
    write_bytelevel_bpe_tokenizer(o.out, base);
  const auto added = detail::internvl_added_tokens(a.llm);
  check(added.back().id < cfg.vocab_size,
        "synth: token {} ('{}') does not fit the vocabulary of {}", added.back().id,
        added.back().content, cfg.vocab_size);
  detail::add_tokens_to_tokenizer_config(o.out, added);
}

}  // namespace

std::vector<std::string> synth_arch_names() {
  std::vector<std::string> n = {"qwen2-0.5b", "qwen2.5-1.5b",   "qwen3-0.6b",
                                "qwen3-1.7b", "internlm2-1.8b", "llama"};
  for (auto& x : detail::internvl_arch_names()) n.push_back(x);
  return n;
}

void synth_checkpoint(const SynthOptions& o,
                      const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  check(!o.out.empty(), "synth: no output directory given");
  if (o.layers != -1)
    check(o.layers >= 1, "synth: layers = {} must be at least 1 (or -1 for the real count)",
          o.layers);
  const bool vlm = detail::is_internvl_arch(o.arch);
  if (!vlm) {
    check(o.vision_layers == -1, "synth: vision_layers applies only to InternVL archs ({})",
          fmt::join(detail::internvl_arch_names(), ", "));
    check(!o.hf_names, "synth: hf_names applies only to InternVL archs ({})",
          fmt::join(detail::internvl_arch_names(), ", "));
  }
  ArchSpec spec = vlm ? ArchSpec{} : arch_spec(o.arch);  // unknown names fail here
  const DtypeInfo dt = dtype_info(o.dtype);
  if (vlm) return synth_internvl(o, dt, say);

  if (o.layers != -1) spec.config["num_hidden_layers"] = o.layers;
  spec.config["torch_dtype"] = dt.torch;
  // The config we write is parsed by the same code as a downloaded one: one source of truth
  // for the shapes below.
  const LlmConfig cfg = models::parse_llm_config(nlohmann::json::parse(spec.config.dump()),
                                                 "synth " + o.arch + " config.json");

  make_dir(o.out);
  write_text_file(o.out / "config.json", spec.config.dump(2) + "\n");
  write_text_file(o.out / "generation_config.json", spec.generation.dump(2) + "\n");
  write_random_safetensors(o.out / "model.safetensors", hf_llm_tensors(cfg), dt, o.seed, say);

  say("writing tokenizer");
  switch (spec.tok) {
    case TokKind::ByteLevelBpe: write_bytelevel_bpe_tokenizer(o.out, cfg.vocab_size); break;
    case TokKind::SentencePieceLlama:
      write_sentencepiece_tokenizer(o.out, cfg.vocab_size, false);
      break;
    case TokKind::SentencePieceInternLM2:
      write_sentencepiece_tokenizer(o.out, cfg.vocab_size, true);
      break;
  }
}

}  // namespace edgevl::synth
