#pragma once
// What a model's graphs cost, read off the compiled ops through the op table (FLOPs and bytes
// of each op, graph/op_table.h): the bounds `bench` reports figures against. They follow
// whatever the compiler emitted, so a new op or family needs nothing here.
#include "runtime/execution/model.h"

namespace edgevl {

class ModelCost {
 public:
  explicit ModelCost(const Model& m);

  // FLOPs of prefilling n tokens on top of `past` cached ones: the per-token graph at n rows
  // (every projection; attention over past + i keys for query i, a mean of past + (n + 1) / 2)
  // and the head once (the last token's logits).
  double prefill_flops(double n, double past) const;
  // Bytes of every weight one decode step reads (the per-token graph and the head, one
  // embedding row; the RoPE tables' rows are not weights).
  double decode_weight_bytes() const { return weight_bytes_; }
  // K + V bytes one token occupies over all layers.
  double kv_token_bytes() const { return kv_token_bytes_; }
  // Bytes one decode step reads at KV length kv_len (including the new token).
  double decode_bytes(double kv_len) const { return weight_bytes_ + kv_len * kv_token_bytes_; }
  // FLOPs of one tile through InternVL's vision graph (0 without one).
  double vision_flops() const;
  // FLOPs of one image of `patches` patches through the Qwen-VL tower (the compiled graph at
  // that many valid rows, attention over them; 0 without a tower).
  double qwen_vision_flops(int64_t patches) const;

 private:
  const Model& m_;
  const Graph* step_;  // the per-token graph: decode, or prefill where there is none
  double weight_bytes_ = 0, kv_token_bytes_ = 0;
};

}  // namespace edgevl
