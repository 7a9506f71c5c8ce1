#pragma once
// The operands of the gated delta rule kernel, shared by the public API (kernels.h) and the
// per-ISA tables (kernel_table.h): plain pointers and integers.
#include <cstdint>

namespace edgevl::cpu {

// One call of the gated delta rule (Gated DeltaNet, delta_rule_impl.h) over `rows` consecutive
// tokens of one sequence.
struct DeltaRuleArgs {
  const float* qkv;  // [rows][ld_qkv]: q [hk * dk] | k [hk * dk] | v [hv * dv], after the conv
  int64_t ld_qkv;
  const float* a;  // [rows][ld_ab] per value head: the decay's input (in_proj_a)
  const float* b;  // [rows][ld_ab]: beta's input (in_proj_b)
  int64_t ld_ab;
  const float* a_log;    // [hv]
  const float* dt_bias;  // [hv]
  int64_t rows;
  int hk, hv, dk, dv;  // hv a multiple of hk: value head h reads key head h / (hv / hk)
  float* state;        // [hv][dk][dv], read and updated
  float* out;          // [rows][ld_out]: value head h at columns h * dv ..
  int64_t ld_out;
};

}  // namespace edgevl::cpu
