#pragma once
// The .evb's `htp` section: one QNN context binary (every HTP graph of the model, finalized
// offline for one target) and, per model graph, its segments with the QNN tensors at their
// boundaries, so that the runtime retrieves and runs them without building anything.
//
//   u32 version (2) | string target ("htp-v75") | u32 soc | u32 fp16 | u32 flags (v2: 1 =
//   the graphs share weights)
//   u32 n_graphs, each: string graph | u32 n_segments, each:
//     i32 first_op | i32 end_op | string name | io inputs | io outputs
//   io: u32 n, each: u32 role | i32 value | u32 qnn_id | string name | u32[] dims | u32 dtype
//       | f32[] scales | i32[] offsets | i32 axis | u32 bitwidth
//   u64 binary size | binary bytes
// Version 1 had no flags and no role (every tensor a value); it is still read.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/qnn/htp_graph.h"
#include "backend/qnn/htp_lowering.h"

namespace edgevl::qnn {

struct HtpIoTensor {
  HtpIoRole role = HtpIoRole::Value;
  int32_t value = -1;  // the model graph's value id (Value), else the op it belongs to
  HtpTensorDesc desc;
};

struct HtpSegmentRecord {
  int32_t first_op = 0, end_op = 0;
  std::string name;  // the HTP graph's name in the context
  std::vector<HtpIoTensor> inputs, outputs;
};

struct HtpGraphRecord {
  std::string graph;  // the model graph ("prefill", "decode", ...)
  std::vector<HtpSegmentRecord> segments;
};

struct HtpSection {
  HtpTarget target;
  bool fp16 = true;
  bool shared_weights = false;  // built with weight sharing (devices load it, the simulator not)
  std::vector<HtpGraphRecord> graphs;
  std::vector<uint8_t> binary;  // written by serialize; parse leaves it empty (see binary_view)
  std::span<const uint8_t> binary_view;
};

std::vector<uint8_t> serialize_htp_section(const HtpSection& s);
// Checks every count and length against the payload; `what` names it in errors.
HtpSection parse_htp_section(std::span<const uint8_t> payload, const std::string& what);

}  // namespace edgevl::qnn
