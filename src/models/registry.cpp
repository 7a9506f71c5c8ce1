#include "models/registry.h"

#include "core/error.h"
#include "models/internvl.h"

namespace edgevl::models {

// Each family's file defines its accessor; this is the one list of them. Its order is the order
// of `synth --arch` names and of supported model types in messages.
const LlmFamily& qwen2_family();
const LlmFamily& qwen3_family();
const LlmFamily& internlm2_family();
const LlmFamily& llama_family();
const LlmFamily& qwen3_5_family();
const LlmFamily& qwen3_vl_family();

const std::vector<const LlmFamily*>& llm_families() {
  static const std::vector<const LlmFamily*> all = {
      &qwen2_family(), &qwen3_family(),   &internlm2_family(),
      &llama_family(), &qwen3_5_family(), &qwen3_vl_family(),
  };
  return all;
}

std::vector<SynthArch> synth_archs() {
  std::vector<SynthArch> all;
  for (const LlmFamily* f : llm_families())
    for (SynthArch& a : f->synth_archs()) all.push_back(std::move(a));
  for (SynthArch& a : internvl_synth_archs()) all.push_back(std::move(a));
  return all;
}

const LlmFamily* find_family(const std::string& model_type, const std::string& architecture) {
  for (const LlmFamily* f : llm_families()) {
    const auto& names = model_type.empty() ? f->architectures() : f->model_types();
    const std::string& want = model_type.empty() ? architecture : model_type;
    for (const std::string& n : names)
      if (n == want) return f;
  }
  return nullptr;
}

const LlmFamily& family_named(const std::string& name) {
  for (const LlmFamily* f : llm_families())
    if (name == f->name()) return *f;
  fail("model family '{}' is not known to this edgevl (known: {})", name, supported_model_types());
}

std::string supported_model_types() {
  std::string s;
  for (const LlmFamily* f : llm_families())
    for (const std::string& t : f->model_types()) s += (s.empty() ? "" : ", ") + t;
  return s;
}

}  // namespace edgevl::models
