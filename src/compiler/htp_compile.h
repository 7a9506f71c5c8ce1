#pragma once
// `compile --target htp-v7x`: the HTP graphs of every model graph, finalized offline for one
// Hexagon target into one QNN context, stored in the .evb's `htp` section
// (runtime/execution/htp_delegate.h loads it). The a16w8 build takes its activation encodings
// from the ranges the calibration samples reach in the float model on the CPU.
#include <functional>
#include <map>
#include <string>
#include <utility>

#include <filesystem>

#include "compiler/calibration.h"

namespace edgevl::compiler {

// What `compile --target` asks for (compile.h CompileOptions' HTP fields).
struct HtpCompileOptions {
  std::string target;           // htp-v73 | htp-v75 | htp-v79 | htp-v81
  std::string quant = "fp16";   // fp16 | a16w8
  std::filesystem::path calib;  // samples (JSONL) for a16w8's activation ranges
  int threads = 0;
  bool share_weights = false;  // CompileOptions::htp_share_weights
  bool split_layers = false;   // CompileOptions::htp_split_layers
  // compile --overrides: in the quantized builds a matrix typed f16 / f32 / bf16 (or
  // "quantize": false) keeps its matmul in fp16, q8 / q4 take 8 / 4 weight bits.
  std::filesystem::path overrides;
};

// Refuses what cannot work before any compile work: an unknown target or HTP arithmetic, an
// a16w8 build without calibration samples, no QNN library.
void check_htp_options(const HtpCompileOptions& o);

// Each activation's (min, max) over the samples' valid rows, by value name (the decode graphs
// share the prefill graph's names, so their values take its ranges).
using ValueRanges = std::map<std::string, std::pair<float, float>>;
ValueRanges collect_value_ranges(const Model& m, const std::vector<CalibSample>& samples,
                                 int threads, const LogFn& log);

// Builds and stores the `htp` section of the binary at `path` (already written).
void add_htp_section(const std::filesystem::path& path, const HtpCompileOptions& o,
                     const std::function<void(const std::string&)>& log);

}  // namespace edgevl::compiler
