#include "models/family.h"

#include "core/error.h"
#include "models/blocks.h"

namespace edgevl::models {

std::vector<SplitPart> LlmFamily::split(const TensorDef& t, const LlmConfig&) const {
  fail("internal: family {} lists '{}' as fused but does not split it", name(), t.name);
}

Graph LlmFamily::decoder_graph(const std::string& name, int32_t width, const LlmConfig& c,
                               const DecoderTensors& t, const TensorIndex& index) const {
  GraphBuilder b(name, width, index);
  int32_t x = b.activation("input", c.hidden);
  b.graph().input = x;
  const RopeTables rope{b.weight(t.rope_cos), b.weight(t.rope_sin)};
  for (int32_t l = 0; l < c.n_layers; ++l) x = decoder_layer(b, x, t.layers[size_t(l)], c, rope, l);
  b.graph().output =
      rms_norm(b, x, t.final_norm, NormAttrs{.eps = c.norm_eps}, "final_norm", c.hidden, -1);
  return std::move(b.graph());
}

int32_t LlmFamily::decoder_layer(GraphBuilder& b, int32_t x, const LayerTensors& t,
                                 const LlmConfig& c, RopeTables rope, int32_t layer) const {
  return llama_decoder_layer(b, x, t, c, rope, layer);
}

Graph LlmFamily::head_graph(const std::string& name, int32_t width, const LlmConfig& c,
                            const DecoderTensors& t, const TensorIndex& index) const {
  return lm_head_graph(name, width, c, t, index);
}

}  // namespace edgevl::models
