#pragma once
// Per-tensor storage overrides on top of a preset (`edgevl compile --overrides FILE`).
//
// The file is JSON. It accepts the form edge toolchains already write,
//   {"tensor_quantization_overrides": {"lm_head.weight": {"quantize": false}, ...}}
// (a value may also be a one-element list of such objects), plus glob patterns:
//   {"patterns": [{"pattern": "language_model.model.layers.2[0-3].mlp.*", "type": "q8"}]}
// Keys of an override: "quantize" (false keeps the tensor in float: f32 under --quant f32,
// else f16), "type" (f32 f16 bf16 q8 q4), "group" (32 64 128, Q4), "zero_point" (bool, Q4),
// "act8" (bool: int8 activations; default: as the preset), "rotate" (bool: the block Hadamard
// rotation of a Q8 / Q4 matrix's input, backend/cpu/hadamard.h; default: as the preset, which
// rotates the LLM's Q8 / Q4 matrices under w8a8, w4a8 and w4a16). Patterns are fnmatch globs ('*'
// also crosses dots) over the names `edgevl inspect` prints; they apply in file order, then
// exact names, so a name beats a pattern. A name or pattern that matches nothing is an error
// listing the closest tensor names; so is quantizing a norm, bias or table (they stay f32).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "compiler/llm_weights.h"
#include "compiler/quant_preset.h"
#include "core/closest_names.h"
#include "format/evb.h"

namespace edgevl::compiler {

struct TensorOverride {
  std::string selector;  // a tensor name, or a glob when is_pattern
  bool is_pattern = false;
  bool keep_float = false;  // "quantize": false
  std::optional<DType> type;
  std::optional<int> group;
  std::optional<bool> zero_point;
  std::optional<bool> act8;
  std::optional<bool> rotate;
};

struct QuantOverrides {
  std::string source;  // file name, for messages
  std::vector<TensorOverride> rules;
};

QuantOverrides read_quant_overrides(const std::filesystem::path& path);
QuantOverrides parse_quant_overrides(const std::string& json_text, const std::string& source);

// Applies the rules to tensor entries whose preset storage is already assigned (roles[i] is
// entries[i]'s role); recomputes bytes. Throws on a selector that matches nothing.
void apply_quant_overrides(const QuantOverrides& o, const QuantPreset& preset,
                           const std::vector<WeightRole>& roles, std::vector<TensorEntry>& entries);

// Whether rule r names `tensor` (its exact name, or its glob).
bool override_matches(const TensorOverride& r, const std::string& tensor);

// An overrides file pinning each (name, type) as an exact-name override ("f16", "q8", ...).
std::string overrides_json(const std::vector<std::pair<std::string, std::string>>& name_type);

}  // namespace edgevl::compiler
