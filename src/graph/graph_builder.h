#pragma once
// Builds a graph of the IR: creates named weight and activation values and appends ops.
// Weights are looked up by tensor-table name. It knows only the IR (graph.h, op_table.h); what
// a model's graph holds is its family's (src/models), built from the shared blocks there.
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "graph/graph.h"
#include "graph/op_table.h"

namespace edgevl {

// Tensor-table name -> index in the model's tensor table.
using TensorIndex = std::map<std::string, int32_t>;

class GraphBuilder {
 public:
  GraphBuilder(std::string name, int32_t width, const TensorIndex& index) : index_(index) {
    g_.name = std::move(name);
    g_.width = width;
  }

  int32_t weight(const std::string& name) {
    if (name.empty()) return -1;
    auto it = cache_.find(name);
    if (it != cache_.end()) return it->second;
    auto t = index_.find(name);
    check(t != index_.end(), "internal: weight '{}' not in the tensor table", name);
    Value v;
    v.name = name;
    v.kind = ValueKind::Weight;
    v.weight = t->second;
    g_.values.push_back(v);
    return cache_[name] = int32_t(g_.values.size() - 1);
  }

  // An activation of `rows` rows (default: the graph width) and `cols` floats per row.
  int32_t activation(const std::string& name, int64_t cols, int64_t rows = -1) {
    Value v;
    v.name = name;
    v.kind = ValueKind::Activation;
    v.dtype = DType::F32;
    v.shape = {rows < 0 ? g_.width : rows, cols};
    g_.values.push_back(v);
    return int32_t(g_.values.size() - 1);
  }

  int32_t op(OpType type, std::vector<int32_t> inputs, const std::string& out_name, int64_t cols,
             int32_t layer, int64_t rows = -1) {
    // A builder's slip shows here, naming the op, rather than as a refused binary at load.
    const OpDef& def = op_def(type);
    check(int(inputs.size()) >= def.min_inputs && int(inputs.size()) <= def.max_inputs,
          "internal: {} '{}' built with {} inputs", def.name, out_name, inputs.size());
    Op o;
    o.type = type;
    o.inputs = std::move(inputs);
    o.output = activation(out_name, cols, rows);
    o.layer = layer;
    g_.ops.push_back(o);
    return o.output;
  }

  // The output has as many rows as x.
  int32_t matmul(int32_t x, const std::string& w, const std::string& b, const std::string& out,
                 int64_t cols, int32_t layer) {
    std::vector<int32_t> in = {x, weight(w)};
    if (!b.empty()) in.push_back(weight(b));
    const int32_t y = op(OpType::MatMul, in, out, cols, layer, g_.values[x].shape[0]);
    last().set(MatMulAttrs{});
    return y;
  }
  int64_t rows(int32_t v) const { return g_.values[v].shape[0]; }

  Op& last() { return g_.ops.back(); }
  Graph& graph() { return g_; }

  // rot_dim: the rotated prefix of each head (partial rotary), 0: all of it; mrope_h / mrope_w:
  // the multimodal sections (RopeAttrs).
  void rope(int32_t x, int32_t cos, int32_t sin, int n_heads, int head_dim, int32_t layer,
            int rot_dim = 0, int32_t mrope_h = 0, int32_t mrope_w = 0) {
    Op o;
    o.type = OpType::Rope;
    o.inputs = {x, cos, sin};
    o.output = x;
    o.layer = layer;
    o.set(RopeAttrs{.n_heads = n_heads,
                    .head_dim = head_dim,
                    .rot_dim = rot_dim,
                    .mrope_h = mrope_h,
                    .mrope_w = mrope_w});
    g_.ops.push_back(o);
  }

 private:
  Graph g_;
  const TensorIndex& index_;
  std::map<std::string, int32_t> cache_;
};

}  // namespace edgevl
