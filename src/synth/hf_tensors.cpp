// The tensor lists synth writes, read off the model families' tables (src/models), so a
// synthesized checkpoint holds exactly what the importer requires.
#include "models/internvl.h"
#include "models/registry.h"
#include "synth/synth.h"

namespace edgevl::synth {

std::vector<HfTensor> hf_llm_tensors(const LlmConfig& c) {
  std::vector<HfTensor> t;
  for (const models::TensorDef& d : models::family_named(c.family).tensors(c))
    t.push_back({d.name, d.shape});
  return t;
}

std::vector<HfTensor> hf_internvl_tensors(const VisionShape& v, const LlmConfig& llm_in,
                                          bool hf_names) {
  const auto naming =
      hf_names ? models::VlmNaming::TransformersNative : models::VlmNaming::Original;
  std::vector<HfTensor> t;
  for (const models::VisionTensor& x : models::internvit_table(naming, v, llm_in.hidden).all())
    t.push_back({x.name, x.shape});
  // The original naming's wrapper forces untied too (InternVLChatConfig).
  LlmConfig llm = hf_names ? models::hf_conversion_llm(llm_in) : llm_in;
  llm.tie_embeddings = false;
  models::LlmNaming rename;
  rename.body = hf_names ? "model.language_model." : "language_model.model.";
  rename.head = hf_names ? "" : "language_model.";
  for (const auto& x : hf_llm_tensors(llm)) t.push_back({rename.rename(x.name), x.shape});
  return t;
}

}  // namespace edgevl::synth
