#pragma once
// Builds the static LLM graphs from the config and the weight plan: `prefill` (width =
// prefill chunk), `decode` (width 1) — both end at the final norm — and `head` (width 1,
// final hidden row -> logits). Every intermediate has a name (layer.N.attn_out, ...).
// With `compile --batch N` (N >= 2) also `decode_batch` (the decode ops at width N: up to N
// sequences' next tokens in one pass over the weights, each row attending over its own KV
// cache, runtime/execution/engine.h decode_batch) and `head_batch` (the head at width N).
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
// The head at another width (`head_batch`).
Graph build_head_graph(const std::string& name, int32_t width, const LlmConfig& cfg,
                       const LlmWeights& w, const std::map<std::string, int32_t>& tensor_index);

}  // namespace edgevl::compiler
