#pragma once
// An HTP context and the graphs in it, built op by op through QNN's C API: the layer edgevl's
// graph translation (and its tests and probe) stand on. Tensors are named; a graph's inputs and
// outputs are bound by the order they were added.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/qnn/qnn_api.h"

namespace edgevl::qnn {

// A Hexagon target: the architecture and the SoC the offline prepare is for.
struct HtpTarget {
  uint32_t arch = 75;       // v73, v75, v79, v81
  uint32_t soc_model = 57;  // QNN's SoC id (SM8650 for v75)
  std::string name() const { return "htp-v" + std::to_string(arch); }
  // "htp-v73" | "htp-v75" | "htp-v79" | "htp-v81" -> its target (the flagship SoC of that arch).
  static HtpTarget parse(const std::string& name);
  static std::vector<HtpTarget> known();
};

// How a tensor's elements are stored: float types, or quantized with one scale/offset
// (per tensor) or one per slice along `axis` (per channel). value = scale * (q + offset).
struct QnnType {
  api::DataType type = api::kFloat32;
  std::vector<float> scales;     // empty for float types
  std::vector<int32_t> offsets;  // same length as scales
  int32_t axis = -1;             // >= 0: per-channel along this axis
  uint32_t bitwidth = 0;         // 4: int4 values held one per byte of an 8-bit type
  static QnnType f32() { return {}; }
  static QnnType f16() { return {api::kFloat16, {}, {}, -1, 0}; }
  static QnnType i32() { return {api::kInt32, {}, {}, -1, 0}; }
  static QnnType quant(api::DataType t, float scale, int32_t offset, uint32_t bits = 0) {
    return {t, {scale}, {offset}, -1, bits};
  }
  size_t element_bytes() const;
};

// One op parameter: a scalar or a small static tensor (perm, axes, ranges).
struct QnnParam {
  std::string name;
  api::Scalar scalar{};
  bool is_tensor = false;
  std::vector<uint32_t> dims;        // tensor parameter
  std::vector<uint32_t> u32_values;  // its values (uint32 tensor)
  std::vector<int32_t> i32_values;   // or these (int32 tensor)
  static QnnParam boolean(const std::string& n, bool v);
  static QnnParam u32(const std::string& n, uint32_t v);
  static QnnParam i32(const std::string& n, int32_t v);
  static QnnParam f32(const std::string& n, float v);
  static QnnParam u32_tensor(const std::string& n, std::vector<uint32_t> dims,
                             std::vector<uint32_t> values);
  static QnnParam i32_tensor(const std::string& n, std::vector<uint32_t> dims,
                             std::vector<int32_t> values);
};

// Per-run figures from the HTP profile.
struct HtpRunStats {
  uint64_t accel_cycles = 0;  // simulated accelerator cycles of the execute
  uint64_t accel_us = 0;      // the backend's accelerator time
  double host_ms = 0;         // wall time of the execute call on this machine
  std::vector<std::pair<std::string, uint64_t>> node_cycles;  // per node (detailed profile)
};

class HtpContext;

// A graph input or output as QNN knows it: what execute() needs to bind a buffer to it.
struct HtpTensorDesc {
  uint32_t id = 0;  // QNN's tensor id, given at creation
  std::string name;
  std::vector<uint32_t> dims;
  QnnType type;
};

class HtpGraph {
 public:
  // Tensors: returns the id to use in add_node.
  int input(const std::string& name, std::vector<uint32_t> dims, QnnType t);
  int output(const std::string& name, std::vector<uint32_t> dims, QnnType t);
  int native(const std::string& name, std::vector<uint32_t> dims, QnnType t);
  // Static data is copied: the caller's buffer may go away.
  int constant(const std::string& name, std::vector<uint32_t> dims, QnnType t,
               std::span<const uint8_t> bytes);
  // A weight: in a context that shares weights, graphs holding the same bytes under the same
  // key and encoding hold them once (the name is the key and a hash of what it holds).
  int weight(const std::string& key, std::vector<uint32_t> dims, QnnType t,
             std::span<const uint8_t> bytes);
  void node(const std::string& name, const std::string& type, std::vector<int> inputs,
            std::vector<int> outputs, std::vector<QnnParam> params = {});
  // Validates every node with the backend first (so the error names the op), then finalizes
  // (the offline prepare for the context's target).
  void finalize();
  // Runs once on the device (here: the simulator). Buffers in input()/output() order.
  // `node_cycles`: also each node's cycles.
  HtpRunStats execute(std::span<const std::span<const uint8_t>> inputs,
                      std::span<const std::span<uint8_t>> outputs, bool node_cycles = false);

  const std::string& name() const { return name_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  std::vector<HtpTensorDesc> input_descs() const;
  std::vector<HtpTensorDesc> output_descs() const;

 private:
  friend class HtpContext;
  struct Slot {
    api::Tensor t;
    std::string name;
    std::vector<uint32_t> dims;
    QnnType type;
    std::vector<uint8_t> data;
    std::vector<api::ScaleOffset> axis_encodings;  // per-channel 8/16/32-bit encodings
  };
  HtpGraph(HtpContext& ctx, std::string name, api::Handle handle)
      : ctx_(ctx), name_(std::move(name)), handle_(handle) {}
  int add(const std::string& name, std::vector<uint32_t> dims, QnnType t, api::TensorType kind,
          std::span<const uint8_t> bytes);
  api::Tensor& fix(Slot& s);  // points the QNN tensor at the slot's own name/dims/encodings

  HtpContext& ctx_;
  std::string name_;
  api::Handle handle_;
  std::deque<Slot> slots_;         // stable addresses: QNN keeps pointers into them until finalize
  std::deque<QnnParam> params_;    // tensor parameters' data: read at finalize, too
  std::deque<std::string> names_;  // parameter and parameter-tensor names
  std::vector<int> inputs_, outputs_;
  std::map<std::string, int> weights_;  // weight() by name
  bool finalized_ = false;
};

class HtpContext {
 public:
  // share_weights: the graphs built in it share equal weights (HtpGraph::weight), so the prefill
  // and decode graphs of one model hold each projection once.
  explicit HtpContext(const HtpTarget& target, bool share_weights = false);
  // A context from a binary made by binary(): its graphs are retrieved by name.
  HtpContext(const HtpTarget& target, std::span<const uint8_t> binary);
  ~HtpContext();
  HtpContext(const HtpContext&) = delete;
  HtpContext& operator=(const HtpContext&) = delete;

  // precision_fp16: float tensors run in fp16 on the HTP (its float mode).
  HtpGraph& graph(const std::string& name, bool precision_fp16 = true);
  // A graph of a context made from a binary, with its inputs and outputs as recorded.
  HtpGraph& retrieve(const std::string& name, const std::vector<HtpTensorDesc>& inputs,
                     const std::vector<HtpTensorDesc>& outputs);
  std::vector<uint8_t> binary() const;
  const HtpTarget& target() const { return target_; }
  bool shares_weights() const { return share_weights_; }

 private:
  friend class HtpGraph;
  const api::CustomConfig* custom(void* config);
  const void** device_config();
  HtpTarget target_;
  bool share_weights_ = false;
  api::Handle backend_ = nullptr, device_ = nullptr, context_ = nullptr;
  std::deque<HtpGraph> graphs_;
  // Configs handed to QNN live as long as the context: the library may read them after the
  // call that took them.
  std::deque<api::HtpDeviceConfig> device_configs_;
  std::deque<api::HtpGraphConfig> graph_configs_;
  std::deque<api::HtpContextConfig> context_configs_;
  std::deque<api::CustomConfig> configs_;
  std::deque<std::vector<const void*>> config_lists_;
};

}  // namespace edgevl::qnn
