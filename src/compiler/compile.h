#pragma once
// `edgevl compile`: hub checkpoint directory -> .evb context binary.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "compiler/calibration.h"

namespace edgevl::compiler {

struct CompileOptions {
  std::filesystem::path input;   // checkpoint directory
  std::filesystem::path output;  // .evb path
  std::string quant = "f16";     // preset: f32, f16, bf16, w8a8, w4a8, w4a16 (quant_preset.h)
  int group = 32;                // Q4 group size along the input dim: 32, 64, 128
  bool zero_point = false;       // Q4 with a zero point per group
  int32_t context = 0;           // KV capacity; 0 = min(max_position_embeddings, 4096)
  // Tokens per prefill execution. 512: larger calls amortize the per-call weight preparation
  // of the AMX routes (Q4 dequantization, F16 split) and the pool dispatches; a 334-token
  // image prompt runs in one call. Measured (2026-11-30, internvl2-1b synth, 2 threads, loaded
  // host): pp512 +13% w4a8, +15-19% w8a8 over 128. Memory: the prefill arena of Qwen2-0.5B
  // grows 9.3 -> 37.2 MB, below the vision graph's 52.8 MB that a VLM's arena holds anyway.
  int32_t prefill_chunk = 512;
  // Most sequences one batched decode step serves (`decode_batch` / `head_batch` graphs,
  // runtime/execution/engine.h decode_batch), and most rows a speculative verification runs through
  // them; 1 = no batch graphs. 16: verifying the default 8 drafted tokens takes 9 rows, and past
  // the width they fall to the prefill graph (slower kernels at 9 rows: 2.8-3.1x a decode step
  // against 2.3-2.6x, qwen2-0.5b w8a8, Zen 5). The graphs cost only metadata and arena rows
  // (16 x vocab floats of logits: 9.7 MB for Qwen2's vocabulary; peak RSS +2 MB measured).
  int32_t decode_batch = 16;
  // Qwen-VL: the vision tower graph's width in patches, the largest image it takes (larger ones
  // are resized to fit, as smart_resize does with a smaller max_pixels); a multiple of 4, at
  // most 16384. 0 = the processor's max_pixels in patches, at most 4096 (1024x1024 at patch 16).
  // The cost of an image follows its own patches; a wider graph costs arena memory.
  int32_t vision_max_patches = 0;
  std::string vision_quant;  // vision tower storage: "" (the preset's), f32, f16, bf16, w8a8
  std::string kv = "auto";   // KV cache type: f32, f16, q8 or auto (f32 for --quant f32, else f16)
  std::filesystem::path overrides;  // per-tensor storage overrides (quant_overrides.h)
  std::filesystem::path calib;      // calibration samples, JSONL (calibration.h)
  int64_t calib_rows = 256;         // recorded input rows per projection
  bool calib_check = true;          // keep calibration only if it lowers KL on the samples
  int threads = 0;                  // for calibration runs; 0 = physical cores
  // "htp-v73" | "htp-v75" | "htp-v79" | "htp-v81": also build the HTP graphs of every model
  // graph, finalize them for that Hexagon target and store the context binary in the .evb
  // (needs the QNN HTP library at compile time only). "": CPU only.
  std::string htp_target;
  // The HTP graphs' arithmetic: "fp16", or "a16w8" (int8 weights per channel, uint16
  // activations with static encodings from the ranges `calib`'s samples reach on the CPU).
  std::string htp_quant = "fp16";
  // The HTP graphs share equal weights in the context binary (the prefill and decode graphs
  // hold each projection once). Devices load such binaries; the x86 simulator cannot.
  bool htp_share_weights = false;
  // An HTP graph per transformer layer, so that every layer's output leaves the HTP (what
  // quant-report --target compares); slower than the whole-graph default.
  bool htp_split_layers = false;
  // Transforms chosen earlier (e.g. by a previous compile); when set, `calib` is not run.
  std::shared_ptr<const Transforms> transforms;
  // A float (f32) model of the same checkpoint and activations already recorded on it from
  // `calib`'s samples: when both are set, calibration uses them instead of its own.
  const Model* calib_reference = nullptr;
  const ActivationMap* calib_activations = nullptr;
  std::function<void(const std::string&)> log;  // progress lines
};

struct CompileSummary {
  uint64_t file_bytes = 0;
  uint64_t weight_bytes = 0;
  size_t tensors = 0;
  double seconds = 0;
  bool calibrated = false;  // calibration ran (its transforms may have been dropped)
  CalibrationSummary calibration;
  std::shared_ptr<const Transforms> transforms;  // what the binary applies (null: none)
};

CompileSummary compile_model(const CompileOptions& opts);

}  // namespace edgevl::compiler
