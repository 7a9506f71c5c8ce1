#pragma once
// The QNN HTP backend behind the runtime: in each graph of a model, the runs of ops the HTP
// supports (backend/qnn/htp_lowering.h) become HTP graphs of one context; the graph's runner
// hands those spans to them and runs the rest on the CPU. Without a compiled context binary in
// the model the graphs are built and finalized when the backend is made (the online path).
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
  std::string target = "htp-v75";
  bool fp16 = true;  // the float build: f16 weights, f16 math on the HTP
};

// What the backend put where, for `inspect`-style reports and tests.
struct HtpGraphReport {
  std::string graph;
  int32_t ops = 0, htp_ops = 0, segments = 0;
  std::vector<std::string> cpu_ops;  // kinds left on the CPU (unique, in order)
};

class HtpBackend {
 public:
  HtpBackend(const Model& m, const HtpOptions& o);
  ~HtpBackend();
  // The delegate for one of the model's graphs; null when nothing of it runs on the HTP.
  std::unique_ptr<GraphDelegate> delegate_for(const Graph& g);
  const std::vector<HtpGraphReport>& report() const { return report_; }
  // Accumulated simulated accelerator cycles and executes (the simulator's figures).
  uint64_t accel_cycles() const { return *cycles_; }
  uint64_t executes() const { return *executes_; }

 private:
  const Model& model_;
  HtpOptions opts_;
  std::unique_ptr<qnn::HtpContext> ctx_;
  std::vector<HtpGraphReport> report_;
  std::shared_ptr<uint64_t> cycles_ = std::make_shared<uint64_t>(0);
  std::shared_ptr<uint64_t> executes_ = std::make_shared<uint64_t>(0);
};

// A weight of m as floats in its logical shape, whatever its stored type.
std::vector<float> weight_as_f32(const Model& m, int32_t index);

}  // namespace edgevl
