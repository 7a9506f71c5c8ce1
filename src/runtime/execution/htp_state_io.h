#pragma once
// The sequence state an HTP graph takes and gives back when attention runs on the HTP (the
// seeds' AR-N / AR-1 graphs, KV cache as graph I/O): the rows' rotary cos / sin, the causal
// mask over [cache slots | chunk rows], the layer's cached keys and values in, the chunk's new
// keys and values out. Everything is f16, the fp16 build's type (backend/qnn/htp_lowering.h).
#include <cstdint>
#include <vector>

#include "backend/qnn/htp_lowering.h"
#include "runtime/execution/op_runners.h"

namespace edgevl {

// Writes extra input `io` of segment `seg` for run r into `out` (f16, htp_io_dims' shape).
void htp_state_input(const qnn::HtpSegment& seg, const qnn::HtpIo& io, const GraphRun& r,
                     std::vector<uint8_t>& out);

// Stores the chunk's keys and values of Attention op `op_index` ([kv_heads][W][head_dim] f16
// each) at the run's positions in its layer's cache, as the CPU's Attention op would.
void htp_store_kv(int32_t op_index, const std::vector<uint8_t>& k_new,
                  const std::vector<uint8_t>& v_new, const GraphRun& r);

}  // namespace edgevl
