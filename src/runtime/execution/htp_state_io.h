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

// The cos / sin row of each of the m rows a Rope op rotates by, [m][rotated / 2] each:
// frequency f of row i from the table row of its position (plain), or of the position of f's
// axis (MRoPE, when rope_thw is given and the op has sections).
void rope_rows(const RopeAttrs& a, const float* cos_table, const float* sin_table,
               int64_t table_rows, const int32_t* positions, const int32_t* rope_thw, int64_t m,
               float* cos_rows, float* sin_rows);

}  // namespace edgevl
