#pragma once
// `edgevl quant-report`: what a quantization setting costs, layer by layer and end to end.
//
// Compiles the checkpoint twice into a private temporary directory: at f32 (the reference)
// and with the requested preset / overrides / calibration / KV type. Then:
//   * per quantized projection: the error of its output against float on recorded inputs of
//     the float model (the calibration samples, else the evaluation text), SQNR in dB and
//     relative L2, each layer fed the same float input (errors do not accumulate);
//   * end to end: next-token top-1 agreement and mean KL(float || quantized), teacher-forced
//     over the evaluation text (--text, else the calibration texts, else 128 tokens the float
//     model generates greedily from BOS), and perplexity of both models when --text is given;
//   * optionally, an overrides file protecting the worst layers (Q4 -> Q8 -> F16) until the
//     end-to-end KL meets a target.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "compiler/calibration.h"

namespace edgevl {
class Model;
class Session;
}  // namespace edgevl

namespace edgevl::compiler {

struct QuantReportOptions {
  std::filesystem::path input;
  std::string quant = "w4a8";  // with `target`: w8a16 or f16 (the HTP's builds)
  // An HTP target ("htp-v75"): the quantized model is the HTP build run on the HTP (its
  // simulator here); the per-layer table is then the error of each value at the HTP graphs'
  // boundaries, in graph order, with the float model's error carried in (where it grows).
  std::string target;
  int group = 32;
  bool zero_point = false;
  std::string vision_quant;  // as compile --vision-quant ("": the preset's)
  std::string kv = "auto";
  std::filesystem::path overrides, calib, text;
  int64_t max_tokens = 1024;  // evaluation tokens taken from --text
  int64_t calib_rows = 256;
  int threads = 0;
  std::filesystem::path write_overrides;
  double target_kl = 0.01;
  LogFn log;
};

struct LayerReport {
  std::string name, type;
  double sqnr_db = 0, rel_l2 = 0;
};

struct Agreement {
  double top1 = 0, mean_kl = 0;
  double nll = 0, nll_float = 0;  // mean next-token negative log-likelihood
  int64_t positions = 0;
};

// VLMs: the quantized vision tower against the f32 one on one image (the first calibration
// image, else a synthetic gradient tile): cosine similarity of the vision embeddings, and the
// next-token distribution after an image prompt, top-1 equal and KL: of the quantized model vs
// the f32 one (all quantization), and of the quantized LLM fed the quantized tower's features
// vs the f32 tower's (the tower's own share).
struct VisionReport {
  bool present = false;
  std::string source;   // which image
  std::string storage;  // "bf16", "q8a8", ...: the encoder projections' type
  double cosine = 0, kl = 0, kl_tower = 0;
  bool top1_same = false, top1_same_tower = false;
};

struct QuantReport {
  std::string quant, kv_type, eval_source;
  std::string target;            // the HTP target, or ""
  bool layers_in_order = false;  // `layers` in graph order (HTP), else worst first
  bool calibrated = false;
  CalibrationSummary calibration;
  uint64_t weight_bytes = 0, weight_bytes_float = 0, kv_bytes = 0, kv_bytes_float = 0;
  Agreement agreement;
  VisionReport vision;
  bool has_perplexity = false;
  std::vector<LayerReport> layers;  // worst first
  // --write-overrides
  std::vector<std::pair<std::string, std::string>> protected_layers;
  Agreement agreement_protected;
  bool target_met = false;
};

QuantReport quant_report(const QuantReportOptions& o);

// Teacher-forced comparison of all-position logits of `q` against `ref` over `seqs`.
// What a caller adds to compare_models' single pass: `attach(ref, q)` before the first
// sequence (dump hooks), `after_sequence()` after each.
struct CompareHooks {
  std::function<void(Session& ref, Session& q)> attach;
  std::function<void()> after_sequence;
};

// `q_backend`: what q runs on (EngineOptions::backend).
Agreement compare_models(const Model& ref, const Model& q,
                         const std::vector<std::vector<int32_t>>& seqs, int threads,
                         const std::string& q_backend = "cpu", const CompareHooks& hooks = {});

}  // namespace edgevl::compiler
