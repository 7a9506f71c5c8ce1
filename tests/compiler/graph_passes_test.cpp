// The compiler's graph passes (compiler/graph_passes.cpp): matmul epilogues, bf16 block
// hand-offs, self-attention precision, and the arena plan they feed; on small graphs built by
// hand, and on the compiled golden models end to end (fused against unfused execution).
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "backend/cpu/kernels.h"
#include "compiler/graph_passes.h"
#include "core/error.h"
#include "graph/graph_builder.h"
#include "graph/graph_io.h"
#include "runtime/execution/session.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

// A vision-style block over `rows` rows: LayerNorm -> fc1 -> GELU -> fc2 -> residual Add, then
// a second projection of the LayerNorm output that is also read by an Add (no hand-off).
struct Tiny {
  std::vector<TensorEntry> tensors;
  std::map<std::string, int32_t> index;
  Graph g;
};

Tiny tiny_graph(int64_t rows, DType matrices) {
  Tiny t;
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape, DType dt) {
    TensorEntry e;
    e.name = name;
    e.shape = std::move(shape);
    e.dtype = dt;
    t.index[name] = int32_t(t.tensors.size());
    t.tensors.push_back(e);
  };
  const int64_t d = 64, ffn = 128;
  tensor("ln.w", {d}, DType::F32);
  tensor("ln.b", {d}, DType::F32);
  tensor("fc1.w", {ffn, d}, matrices);
  tensor("fc1.b", {ffn}, DType::F32);
  tensor("fc2.w", {d, ffn}, matrices);
  tensor("proj.w", {d, d}, matrices);
  GraphBuilder b("t", int32_t(rows), t.index);
  const int32_t x = b.activation("x", d);
  b.graph().input = x;
  const int32_t n = b.op(OpType::LayerNorm, {x, b.weight("ln.w"), b.weight("ln.b")}, "ln", d, 0);
  b.last().set(NormAttrs{.eps = 1e-6f});
  const int32_t h = b.matmul(n, "fc1.w", "fc1.b", "fc1", ffn, 0);
  const int32_t g = b.op(OpType::GeluErf, {h}, "gelu", ffn, 0);
  const int32_t o = b.matmul(g, "fc2.w", "", "fc2", d, 0);
  const int32_t r = b.op(OpType::Add, {x, o}, "res", d, 0);
  const int32_t p = b.matmul(r, "proj.w", "", "proj", d, 0);
  const int32_t q = b.op(OpType::Add, {p, p}, "twice", d, 0);  // two reads: not absorbed
  b.graph().output = b.op(OpType::Add, {q, n}, "out", d, 0);
  t.g = std::move(b.graph());
  return t;
}

int32_t id(const Graph& g, const std::string& name) {
  const int32_t i = g.find(name);
  EXPECT_GE(i, 0) << name;
  return i;
}

TEST(GraphPasses, MatmulsAbsorbTheGeluOrAddAfterThem) {
  Tiny t = tiny_graph(32, DType::F32);
  compiler::fuse_matmul_epilogues(t.g);
  const Graph& g = t.g;
  // ln, fc1+gelu, fc2+add, proj, twice, out
  ASSERT_EQ(g.ops.size(), 6u);
  const Op& fc1 = g.ops[1];
  EXPECT_EQ(fc1.matmul().epilogue, Epilogue::kGeluErf);
  EXPECT_EQ(fc1.output, id(g, "gelu"));
  EXPECT_EQ(fc1.matmul().pre, id(g, "fc1"));
  EXPECT_EQ(fc1.bias(), id(g, "fc1.b"));
  EXPECT_EQ(fc1.residual(), -1);
  const Op& fc2 = g.ops[2];
  EXPECT_EQ(fc2.matmul().epilogue, Epilogue::kAddResidual);
  EXPECT_EQ(fc2.output, id(g, "res"));
  EXPECT_EQ(fc2.residual(), id(g, "x"));
  EXPECT_EQ(fc2.bias(), -1);
  EXPECT_EQ(g.ops[3].matmul().epilogue, Epilogue::kNone);  // its product is read twice
  EXPECT_EQ(g.ops[3].matmul().pre, -1);
  for (const Op& op : g.ops) EXPECT_NE(op.type, OpType::GeluErf);
}

TEST(GraphPasses, ThePlanWritesEpiloguesInPlaceButNeverOverTheirInputs) {
  Tiny t = tiny_graph(32, DType::F32);
  compiler::finish_graph(t.g, t.tensors);
  const Graph& g = t.g;
  auto span = [&](int32_t v) {
    return std::pair<int64_t, int64_t>{g.values[v].offset,
                                       g.values[v].offset + int64_t(g.values[v].bytes())};
  };
  auto overlap = [&](int32_t a, int32_t b) {
    return span(a).first < span(b).second && span(b).first < span(a).second;
  };
  for (const Op& op : g.ops) {
    if (op.type != OpType::MatMul) continue;
    EXPECT_FALSE(overlap(op.output, op.inputs[0])) << g.values[op.output].name;
    if (op.matmul().epilogue == Epilogue::kNone) continue;
    EXPECT_FALSE(overlap(op.matmul().pre, op.inputs[0])) << g.values[op.output].name;
  }
  // GELU over its product; the residual sum over the residual (x, the graph input, keeps its
  // own slot, so over the product there).
  EXPECT_EQ(g.values[id(g, "gelu")].offset, g.values[id(g, "fc1")].offset);
  EXPECT_EQ(g.values[id(g, "res")].offset, g.values[id(g, "fc2")].offset);
  EXPECT_FALSE(overlap(id(g, "res"), id(g, "x")));
  EXPECT_GE(g.arena_bytes, span(id(g, "out")).second);
}

TEST(GraphPasses, Bf16BlocksOnlyBetweenBf16KernelsWithRoom) {
  {
    Tiny t = tiny_graph(64, DType::BF16);
    compiler::finish_graph(t.g, t.tensors);
    std::set<std::string> flagged;
    for (const Value& v : t.g.values)
      if (v.bf16_blocks) flagged.insert(v.name);
    // ln is read by the final Add too; the GELU's output only by fc2.
    EXPECT_EQ(flagged, std::set<std::string>{"gelu"});
  }
  {
    Tiny t = tiny_graph(64, DType::Q8);  // no bf16 block kernels for int8 weights
    compiler::finish_graph(t.g, t.tensors);
    for (const Value& v : t.g.values) EXPECT_FALSE(v.bf16_blocks) << v.name;
  }
  {
    Tiny t = tiny_graph(1, DType::BF16);  // one row: its f32 slot is smaller than a block
    compiler::finish_graph(t.g, t.tensors);
    for (const Value& v : t.g.values) EXPECT_FALSE(v.bf16_blocks) << v.name;
  }
}

TEST(GraphPasses, FusedGraphsRoundTripAndBadAttributesAreRefused) {
  Tiny t = tiny_graph(64, DType::BF16);
  compiler::finish_graph(t.g, t.tensors);
  ByteWriter w;
  write_graph(w, t.g);
  {
    ByteReader r(std::span<const uint8_t>(w.buffer()), "mem");
    const Graph back = read_graph(r, t.tensors.size());
    ASSERT_EQ(back.ops.size(), t.g.ops.size());
    for (size_t i = 0; i < back.ops.size(); ++i) {
      EXPECT_EQ(back.ops[i].inputs, t.g.ops[i].inputs);
      EXPECT_EQ(back.ops[i].attr_i, t.g.ops[i].attr_i);
    }
    for (size_t i = 0; i < back.values.size(); ++i)
      EXPECT_EQ(back.values[i].bf16_blocks, t.g.values[i].bf16_blocks);
  }
  auto refused = [&](Graph bad) {
    ByteWriter wb;
    write_graph(wb, bad);
    ByteReader r(std::span<const uint8_t>(wb.buffer()), "mem");
    try {
      read_graph(r, t.tensors.size());
    } catch (const Error&) {
      return true;
    }
    return false;
  };
  Graph bad = t.g;
  bad.ops[1].attr_i[0] = 7;  // no such epilogue
  EXPECT_TRUE(refused(bad));
  bad = t.g;
  bad.ops[3].attr_i[1] = 0;  // a product without an epilogue
  EXPECT_TRUE(refused(bad));
  bad = t.g;
  bad.ops[1].attr_i[1] = bad.ops[1].inputs[0];  // the product over its own input
  EXPECT_TRUE(refused(bad));
  bad = t.g;
  bad.ops[2].inputs.pop_back();  // an add epilogue without its residual
  EXPECT_TRUE(refused(bad));
}

// The golden models compiled: a fused epilogue (in the bf16 block kernel where this CPU has
// one) gives the same bits as the epilogue run as a step of its own (forced by a dump hook,
// which also sees every product under its own name).
TEST(GraphPasses, FusedEpiloguesMatchTheUnfusedStepsBitForBit) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", "bf16");
  std::vector<int32_t> ids(96);
  std::iota(ids.begin(), ids.end(), 3);
  auto logits = [&](bool with_dump, std::set<std::string>* seen) {
    Session s(m, SessionOptions{2, 0});
    s.set_all_logits(true);
    if (with_dump)
      s.engine().set_dump([&](const std::string&, const std::string& value, const float*, int64_t,
                              int64_t) { seen->insert(value); });
    s.eval_tokens(ids);
    return s.all_logits();
  };
  std::set<std::string> seen;
  const std::vector<float> fused = logits(false, nullptr), plain = logits(true, &seen);
  ASSERT_EQ(fused.size(), plain.size());
  for (size_t i = 0; i < fused.size(); ++i) ASSERT_EQ(fused[i], plain[i]) << "logit " << i;
  for (const char* v : {"layer.0.attn_out", "layer.0.attn_res", "layer.0.ffn_out", "layer.0.out"})
    EXPECT_TRUE(seen.count(v)) << v;
  const Graph& prefill = m.graph("prefill");
  int fused_ops = 0;
  for (const Op& op : prefill.ops)
    fused_ops += op.type == OpType::MatMul && op.matmul().epilogue == Epilogue::kAddResidual;
  EXPECT_EQ(fused_ops, 2 * m.config().n_layers);
  if (!cpu::bf16_blocks_supported(int64_t(ids.size())))
    std::printf("  no bf16 block kernels here: both runs took the unfused steps\n");
}

}  // namespace
}  // namespace edgevl
