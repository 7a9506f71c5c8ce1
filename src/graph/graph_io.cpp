#include "graph/graph_io.h"

#include "core/error.h"
#include "graph/op_table.h"

namespace edgevl {

void write_graph(ByteWriter& w, const Graph& g) {
  w.put_string(g.name);
  w.put<int32_t>(g.width);
  w.put<int32_t>(g.input);
  w.put<int32_t>(g.output);
  w.put<int64_t>(g.arena_bytes);
  w.put<uint32_t>(uint32_t(g.values.size()));
  for (const Value& v : g.values) {
    w.put_string(v.name);
    w.put<uint32_t>(uint32_t(v.kind));
    w.put<uint32_t>(uint32_t(v.dtype));
    w.put_vector(v.shape);
    w.put<int64_t>(v.offset);
    w.put<int32_t>(v.weight);
    w.put<uint32_t>(v.bf16_blocks ? 1u : 0u);  // flags
  }
  w.put<uint32_t>(uint32_t(g.ops.size()));
  for (const Op& op : g.ops) {
    w.put<uint32_t>(uint32_t(op.type));
    w.put_vector(op.inputs);
    w.put<int32_t>(op.output);
    w.put<int32_t>(op.layer);
    for (int32_t a : op.attr_i) w.put<int32_t>(a);
    w.put<float>(op.attr_f);
  }
}

Graph read_graph(ByteReader& r, size_t n_weights) {
  Graph g;
  g.name = r.get_string();
  const std::string what = r.what() + " graph '" + g.name + "'";
  g.width = r.get<int32_t>();
  g.input = r.get<int32_t>();
  g.output = r.get<int32_t>();
  g.arena_bytes = r.get<int64_t>();
  check(g.width > 0 && g.arena_bytes >= 0, "{}: bad width {} or arena size {}", what, g.width,
        g.arena_bytes);
  const uint32_t nv = r.get<uint32_t>();
  check(nv <= r.remaining(), "{}: value count {} exceeds the section", what, nv);
  g.values.resize(nv);
  for (Value& v : g.values) {
    v.name = r.get_string();
    v.kind = ValueKind(r.get<uint32_t>());
    v.dtype = DType(r.get<uint32_t>());
    v.shape = r.get_vector<int64_t>();
    v.offset = r.get<int64_t>();
    v.weight = r.get<int32_t>();
    const uint32_t flags = r.get<uint32_t>();
    check(flags <= 1, "{}: value '{}' has unknown flags {:#x}", what, v.name, flags);
    v.bf16_blocks = flags & 1;
    check(!v.bf16_blocks || v.kind == ValueKind::Activation,
          "{}: weight '{}' flagged as bf16 blocks", what, v.name);
    check(uint32_t(v.kind) <= uint32_t(ValueKind::Activation), "{}: value '{}' has unknown kind {}",
          what, v.name, uint32_t(v.kind));
    for (int64_t d : v.shape)
      check(d > 0 && d < (int64_t(1) << 40), "{}: value '{}' bad shape", what, v.name);
    if (v.kind == ValueKind::Weight)
      check(v.weight >= 0 && size_t(v.weight) < n_weights, "{}: value '{}' names tensor {} of {}",
            what, v.name, v.weight, n_weights);
    if (v.kind == ValueKind::Activation)
      check(dtype_size(v.dtype) > 0 && v.offset >= 0 && v.offset % 64 == 0 &&
                v.offset + int64_t(v.bytes()) <= g.arena_bytes,
            "{}: activation '{}' at {} (+{} bytes) lies outside the arena of {} bytes", what,
            v.name, v.offset, v.bytes(), g.arena_bytes);
  }
  auto valid_id = [&](int32_t id) { return id >= 0 && uint32_t(id) < nv; };
  check(valid_id(g.input) && valid_id(g.output) &&
            g.values[g.input].kind == ValueKind::Activation &&
            g.values[g.output].kind == ValueKind::Activation,
        "{}: bad input/output value ids", what);
  const uint32_t nops = r.get<uint32_t>();
  check(nops <= r.remaining(), "{}: op count {} exceeds the section", what, nops);
  g.ops.resize(nops);
  for (Op& op : g.ops) {
    op.type = OpType(r.get<uint32_t>());
    op.inputs = r.get_vector<int32_t>();
    op.output = r.get<int32_t>();
    op.layer = r.get<int32_t>();
    for (int32_t& a : op.attr_i) a = r.get<int32_t>();
    op.attr_f = r.get<float>();
    check(op_type_known(uint32_t(op.type)), "{}: unknown op type {}", what, uint32_t(op.type));
    const char* name = op_name(op.type);
    for (int32_t id : op.inputs) check(valid_id(id), "{}: op {} input id {}", what, name, id);
    check(valid_id(op.output) && g.values[op.output].kind == ValueKind::Activation,
          "{}: op {} output id {} is not an activation", what, name, op.output);
    const std::string why = op_structure_problem(g, op);
    check(why.empty(), "{}: op {} producing '{}' {}", what, name, g.values[op.output].name, why);
    // Shapes need the tensor table: op_problem() at load (runtime/execution/model.cpp).
  }
  return g;
}

}  // namespace edgevl
