#pragma once
// Calibration: run the float model on sample texts (and images), record what each projection
// sees at its input, and use it to choose per-channel scales that make the quantized layers
// reproduce the float ones more closely.
//
// Method (per group of projections that read the same input; per decoder layer: q/k/v after the
// attention norm, gate/up after the FFN norm, down after SiLU(gate)*up):
//   * An equivalent per-input-channel rescale W' = W diag(s), x' = x / s, where 1/s is folded
//     into what produced x (the norm weight, or the up projection's rows): the float model is
//     unchanged, the quantization grid moves. Candidates: identity; SmoothQuant-style
//     s = max|x|^a / max|W|^(1-a) (a in .25 .5 .75), which moves activation outliers into the
//     weights (helps int8 activations); AWQ-style s = mean|x|^a normalised (a in 1/8 .. 1), which
//     gives the salient input channels finer weight steps (helps Q4). The candidate with the
//     lowest output error of the actual quantized kernels on the recorded rows wins (identity
//     included, so it never makes a layer worse on those rows).
//   * Q4 only: a clip ratio per (row, group) in {1 .. 0.75} minimising the group's weight error
//     weighted by E[x_j^2] (a diagonal approximation of the output error), for unrotated
//     tensors; then, for symmetric Q4, GPTQ error compensation on the recorded rows
//     (compiler/gptq.h). Each is kept only if it lowers the group's measured output error.
// The o_proj input (attention output) is left unscaled: its producer, v_proj, mixes heads under
// GQA, so a scale per channel cannot always be folded exactly.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/gptq.h"
#include "format/evb.h"

namespace edgevl {
class Model;
namespace cpu {
class ThreadPool;
}
}  // namespace edgevl

namespace edgevl::compiler {

struct CalibSample {
  std::string text;
  std::filesystem::path image;  // empty: text only (relative paths resolve against the file)
};

// Lines {"text": "...", "image": "optional path"}; blank lines skipped. Errors name the line.
std::vector<CalibSample> read_calib_jsonl(const std::filesystem::path& path);

// Token ids of the text-only samples (raw, with BOS as the model adds it), each cut to
// max_tokens; image samples are skipped. For teacher-forced end-to-end comparisons.
std::vector<std::vector<int32_t>> text_sequences(const Model& m,
                                                 const std::vector<CalibSample>& samples,
                                                 int64_t max_tokens);

// What one matmul input looked like over the calibration run.
struct ActivationStats {
  int64_t K = 0;
  int64_t rows_seen = 0;
  std::vector<float> absmax;   // per input channel
  std::vector<double> sumabs;  // per input channel
  std::vector<double> sumsq;   // per input channel
  std::vector<float> rows;     // up to max_rows rows of K, a uniform sample (reservoir)
  int64_t n_rows() const { return K ? int64_t(rows.size()) / K : 0; }
};

// Keyed by weight tensor name; projections that read the same value share one object.
using ActivationMap = std::map<std::string, std::shared_ptr<ActivationStats>>;

using LogFn = std::function<void(const std::string&)>;

// Runs `m` (a float model) over the samples and records the input of every matmul.
ActivationMap collect_activations(const Model& m, const std::vector<CalibSample>& samples,
                                  int threads, int64_t max_rows, const LogFn& log);
// The same over token sequences (teacher-forced text).
ActivationMap collect_activations(const Model& m, const std::vector<std::vector<int32_t>>& seqs,
                                  int threads, int64_t max_rows, const LogFn& log);

// How to turn a checkpoint tensor into the one that gets quantized.
struct TensorTransform {
  std::vector<float> col_scale;  // matrix: W[:, j] *= col_scale[j]
  std::vector<float> row_scale;  // 1-D tensor v[i] *= row_scale[i]; matrix: row i *= row_scale[i]
  std::vector<float> clip;       // Q4: clip ratio per (row, group), row-major [N][ng]
  // Symmetric Q4: the GPTQ-compensated matrix (compiler/gptq.h, col_scale already applied) that
  // replaces W before row_scale; col_scale and clip then no longer apply to W.
  GptqGrid replacement;
};
using Transforms = std::map<std::string, TensorTransform>;

// Applies `t` to `w` (shape as in the tensor table) in place.
void apply_transform(const TensorTransform& t, const TensorEntry& e, float* w);

// Output error of one quantized projection against float on recorded input rows.
struct LayerError {
  double sqnr_db = 0;
  double rel_l2 = 0;
};
// w: float weights [N][K] before any transform; t may be null.
LayerError layer_error(cpu::ThreadPool& pool, const ActivationStats& x, const float* w,
                       const TensorEntry& e, const TensorTransform* t);

struct CalibrationSummary {
  int groups = 0, scaled = 0, clipped_tensors = 0, gptq_tensors = 0;
  double mean_gain_db = 0;  // mean over groups of the output SQNR gain on the recorded rows
  // End-to-end check on the calibration texts (compile.h): mean next-token KL against float
  // without and with the transforms, and whether they were kept. Negative: not run.
  double kl_plain = -1, kl_calibrated = -1;
  bool kept = true;
};

// Chooses transforms for the quantized projections of `float_model` (compiled at f32; its
// graphs say which projections share an input and what produced it). `entries` maps tensor
// names to their final storage (after preset and overrides).
Transforms calibrate(cpu::ThreadPool& pool, const Model& float_model,
                     const std::map<std::string, TensorEntry>& entries, const ActivationMap& acts,
                     const LogFn& log, CalibrationSummary* summary);

}  // namespace edgevl::compiler
