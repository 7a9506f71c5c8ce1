#pragma once
// Builds the static LLM graphs from the config and the weight plan: `prefill` (width =
// prefill chunk), `decode` (width 1) — both end at the final norm — and `head` (width 1,
// final hidden row -> logits). Every intermediate has a name (layer.N.attn_out, ...).
#include <map>
#include <string>

#include "compiler/llm_weights.h"
#include "graph/graph.h"

namespace edgevl::compiler {

// `tensor_index` maps tensor-table names to their index.
Graph build_llm_graph(const std::string& name, int32_t width, const LlmConfig& cfg,
                      const LlmWeights& w, const std::map<std::string, int32_t>& tensor_index);
Graph build_head_graph(const LlmConfig& cfg, const LlmWeights& w,
                       const std::map<std::string, int32_t>& tensor_index);

}  // namespace edgevl::compiler
