#include "synth/synth.h"

#include <fmt/format.h>

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
#include "format/json_fields.h"
#include "format/qwen_vision_config.h"
#include "format/safetensors.h"
#include "models/internvl.h"
#include "models/llm_config.h"
#include "models/qwen3_vl_vision.h"
#include "models/registry.h"
#include "synth/synth_tokenizer.h"
#include "synth/text_file.h"

namespace edgevl::synth {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

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

// The arch named `name`, or null.
const models::SynthArch* find_arch(const std::vector<models::SynthArch>& archs,
                                   const std::string& name) {
  for (const models::SynthArch& a : archs)
    if (a.name == name) return &a;
  return nullptr;
}

// The vision-language archs' names, for errors.
std::string vision_arch_names(const std::vector<models::SynthArch>& archs) {
  std::string names;
  for (const models::SynthArch& a : archs)
    if (a.vision) names += (names.empty() ? "" : ", ") + a.name;
  return names;
}

// The tensors of the checkpoint whose config.json `dir` holds and whose LLM config is `cfg`.
std::vector<HfTensor> tensors_of(const fs::path& dir, const LlmConfig& cfg) {
  const models::VlmInfo info = models::load_vlm_info(dir);
  if (!info.is_vlm) {
    std::vector<HfTensor> t = hf_llm_tensors(cfg);
    // A Qwen-VL tower the LLM config holds (Qwen3.5's vision_config).
    if (const QwenVisionShape q = qwen_vision_shape(cfg); q.present())
      for (const auto& x : models::qwen_vision_checkpoint_tensors(q))
        t.push_back({x.name, x.shape});
    return t;
  }
  VisionShape v;
  v.hidden = info.vision.hidden;
  v.layers = info.vision_layers;  // every layer the checkpoint holds
  v.ffn = info.vision.ffn;
  v.image = info.vision.image_size;
  v.patch = info.vision.patch_size;
  v.shuffle = info.vision.shuffle;
  v.qkv_bias = info.vision_qkv_bias;
  return hf_internvl_tensors(v, cfg, info.naming == models::VlmNaming::TransformersNative);
}

void write_tokenizer(const fs::path& out, const models::SynthFiles& f, int32_t vocab_size) {
  const int32_t size = f.tokenizer_size > 0 ? f.tokenizer_size : vocab_size;
  switch (f.tokenizer) {
    case models::SynthTokenizer::ByteLevelBpe: write_bytelevel_bpe_tokenizer(out, size); break;
    case models::SynthTokenizer::SentencePieceLlama:
      write_sentencepiece_tokenizer(out, size, false);
      break;
    case models::SynthTokenizer::SentencePieceInternLM2:
      write_sentencepiece_tokenizer(out, size, true);
      break;
  }
  if (f.edit_tokenizer_config) {
    const fs::path p = out / "tokenizer_config.json";
    ojson cfg = ojson::parse(read_json_file(p).dump());
    f.edit_tokenizer_config(cfg);
    write_text_file(p, cfg.dump(2));
  }
}

}  // namespace

std::vector<std::string> synth_arch_names() {
  std::vector<std::string> n;
  for (const models::SynthArch& a : models::synth_archs()) n.push_back(a.name);
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
  const std::vector<models::SynthArch> archs = models::synth_archs();
  const models::SynthArch* arch = find_arch(archs, o.arch);
  if (!arch || !arch->vision) {
    check(o.vision_layers == -1, "synth: vision_layers applies only to vision-language archs ({})",
          vision_arch_names(archs));
    check(!o.hf_names, "synth: hf_names applies only to vision-language archs ({})",
          vision_arch_names(archs));
  }
  check(arch != nullptr, "synth: unknown architecture '{}'; expected one of {}", o.arch,
        all_arch_names());
  const DtypeInfo dt = dtype_info(o.dtype);
  if (o.vision_layers != -1)
    check(o.vision_layers >= 1,
          "synth: vision_layers = {} must be at least 1 (or -1 for the real count)",
          o.vision_layers);

  const models::SynthFiles files = arch->files({.layers = o.layers,
                                                .vision_layers = o.vision_layers,
                                                .torch_dtype = dt.torch,
                                                .hf_names = o.hf_names});
  make_dir(o.out);
  write_text_file(o.out / "config.json", files.config.dump(2) + "\n");
  write_text_file(o.out / "generation_config.json", files.generation.dump(2) + "\n");
  if (!files.preprocessor.is_null())
    write_text_file(o.out / "preprocessor_config.json", files.preprocessor.dump(2) + "\n");
  // The files just written are read back by the importer's code, as a downloaded checkpoint
  // would be: one source of truth for the shapes of the tensors.
  const LlmConfig cfg = models::load_llm_config(o.out);
  write_random_safetensors(o.out / "model.safetensors", tensors_of(o.out, cfg), dt, o.seed, say);

  say("writing tokenizer");
  write_tokenizer(o.out, files, cfg.vocab_size);
}

}  // namespace edgevl::synth
