#pragma once
// `edgevl compile`: hub checkpoint directory -> .evb context binary.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace edgevl::compiler {

struct CompileOptions {
  std::filesystem::path input;   // checkpoint directory
  std::filesystem::path output;  // .evb path
  std::string quant = "f16";     // preset: f32, f16, bf16, w8a8, w4a8, w4a16 (quant_preset.h)
  int group = 32;                // Q4 group size along the input dim: 32, 64, 128
  bool zero_point = false;       // Q4 with a zero point per group
  int32_t context = 0;           // KV capacity; 0 = min(max_position_embeddings, 4096)
  int32_t prefill_chunk = 128;   // tokens per prefill execution
  std::string kv = "auto";  // KV cache type: f32, f16, q8 or auto (f32 for --quant f32, else f16)
  std::function<void(const std::string&)> log;  // progress lines
};

struct CompileSummary {
  uint64_t file_bytes = 0;
  uint64_t weight_bytes = 0;
  size_t tensors = 0;
  double seconds = 0;
};

CompileSummary compile_model(const CompileOptions& opts);

}  // namespace edgevl::compiler
