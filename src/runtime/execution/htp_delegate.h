#pragma once
// The QNN HTP backend behind the runtime: in each graph of a model, the runs of ops the HTP
// supports (backend/qnn/htp_lowering.h) become HTP graphs of one context; the graph's runner
// hands those spans to them and runs the rest on the CPU. Without a compiled context binary in
// the model the graphs are built and finalized when the backend is made (the online path).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/execution/bound_graph.h"
#include "runtime/execution/model.h"

namespace edgevl {

namespace qnn {
class HtpContext;
}

struct HtpOptions {
  // "htp": the target compiled into the model (`compile --target`), else htp-v75; or a target
  // ("htp-v75"), which a compiled model must match.
  std::string target = "htp";
  bool fp16 = true;     // the float build: f16 weights, f16 math on the HTP; else a16w8 / a16w4
  int weight_bits = 8;  // quantized builds: 8 or 4
  // Quantized builds: per-matrix storage from the overrides file (qnn::HtpPrecision).
  std::function<int(const std::string& tensor)> weight_override;
  // a16w8: each activation's calibrated (min, max) by value name (compiler/htp_compile.h).
  std::function<bool(const std::string& value, float* lo, float* hi)> range;
  // Build the graphs sharing equal weights (compile --htp-share-weights): a smaller context
  // binary for devices; the x86 simulator cannot load one.
  bool share_weights = false;
  bool split_layers = false;  // an HTP graph per layer (HtpCaps::split_layers)
};

// What the backend put where, for `inspect`-style reports and tests.
struct HtpGraphReport {
  std::string graph;
  int32_t ops = 0, htp_ops = 0, segments = 0;
  std::vector<std::string> cpu_ops;  // kinds left on the CPU (unique, in order)
};

class HtpBackend {
 public:
  // With the model's `htp` section: its context binary, loaded (no graph is built). Without:
  // the graphs are built and finalized for the target here (the online path).
  HtpBackend(const Model& m, const HtpOptions& o);
  ~HtpBackend();
  // The delegate for one of the model's graphs; null when nothing of it runs on the HTP.
  std::unique_ptr<GraphDelegate> delegate_for(const Graph& g);
  const std::vector<HtpGraphReport>& report() const { return report_; }
  std::string target() const;
  bool from_binary() const { return from_binary_; }
  double load_ms() const { return load_ms_; }  // context creation (and finalize, online)
  // The `htp` section for the graphs built so far (online path): the context binary and the
  // map from the model's graphs to it.
  std::vector<uint8_t> section() const;
  // Accumulated simulated accelerator cycles and executes (the simulator's figures).
  uint64_t accel_cycles() const { return *cycles_; }
  uint64_t executes() const { return *executes_; }

 private:
  const Model& model_;
  HtpOptions opts_;
  std::unique_ptr<qnn::HtpContext> ctx_;
  std::unique_ptr<struct HtpSectionHolder> section_;  // parsed (offline) or being recorded
  bool from_binary_ = false;
  double load_ms_ = 0;
  std::vector<HtpGraphReport> report_;
  std::shared_ptr<uint64_t> cycles_ = std::make_shared<uint64_t>(0);
  std::shared_ptr<uint64_t> executes_ = std::make_shared<uint64_t>(0);
};

// The HTP section of a model file, summarised for `inspect` ("" when it has none).
std::string describe_htp_section(const Model& m);

// A weight of m as floats in its logical shape, whatever its stored type.
std::vector<float> weight_as_f32(const Model& m, int32_t index);

}  // namespace edgevl
