// The op table (graph/op_table.h): every op kind has one complete entry, the shape rule refuses
// what the loader must refuse, the costs are the multiply-adds and bytes the ops do, and the
// model costs `bench` divides by follow from them.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "core/kv_layout.h"
#include "graph/graph_builder.h"
#include "graph/op_table.h"
#include "runtime/execution/model_cost.h"
#include "runtime/execution/op_runners.h"
#include "support/model_fixture.h"
#include "support/qwen3vl_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

TEST(OpTable, EveryOpKindHasOneCompleteEntryAndARunner) {
  std::set<std::string> names;
  for (uint32_t t = 0; t < kOpTypeCount; ++t) {
    const OpDef& d = op_def(OpType(t));
    EXPECT_EQ(uint32_t(d.type), t);
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    EXPECT_STREQ(op_name(OpType(t)), d.name);
    EXPECT_GE(d.min_inputs, 1);
    EXPECT_LE(d.min_inputs, d.max_inputs);
    EXPECT_NE(d.output_shape, nullptr);
    EXPECT_NE(d.cost, nullptr);
    EXPECT_NE(d.in_place, nullptr);
    EXPECT_NE(op_runner(OpType(t)).run, nullptr);
  }
  EXPECT_FALSE(op_type_known(kOpTypeCount));
  EXPECT_STREQ(op_name(OpType(kOpTypeCount)), "unknown");
}

// A small decoder-like block: RmsNorm -> q/k/v -> Rope -> Attention -> o_proj (+ residual),
// then a SiluMul MLP; its tensors as a compiled binary's table would hold them.
struct Block {
  std::map<std::string, int32_t> index;
  std::vector<std::vector<int64_t>> shapes;
  Graph g;
  std::vector<ValueInfo> infos() const {
    return value_infos(
        g, [&](int32_t w) { return shapes[size_t(w)]; },
        [&](int32_t w) {
          int64_t n = 1;
          for (int64_t d : shapes[size_t(w)]) n *= d;
          return n * 2;  // as f16
        });
  }
};

constexpr int kRows = 5, kHidden = 64, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kFfn = 96;

Block block() {
  Block b;
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape) {
    b.index[name] = int32_t(b.shapes.size());
    b.shapes.push_back(std::move(shape));
  };
  tensor("norm", {kHidden});
  tensor("q", {kHeads * kHeadDim, kHidden});
  tensor("k", {kKvHeads * kHeadDim, kHidden});
  tensor("v", {kKvHeads * kHeadDim, kHidden});
  tensor("o", {kHidden, kHeads * kHeadDim});
  tensor("cos", {128, kHeadDim / 2});
  tensor("sin", {128, kHeadDim / 2});
  tensor("gate", {kFfn, kHidden});
  tensor("up", {kFfn, kHidden});
  GraphBuilder gb("t", kRows, b.index);
  const int32_t x = gb.activation("x", kHidden);
  gb.graph().input = x;
  const int32_t n = gb.op(OpType::RmsNorm, {x, gb.weight("norm")}, "n", kHidden, 0);
  gb.last().set(NormAttrs{.eps = 1e-6f});
  const int32_t q = gb.matmul(n, "q", "", "q_out", kHeads * kHeadDim, 0);
  const int32_t k = gb.matmul(n, "k", "", "k_out", kKvHeads * kHeadDim, 0);
  const int32_t v = gb.matmul(n, "v", "", "v_out", kKvHeads * kHeadDim, 0);
  gb.rope(q, gb.weight("cos"), gb.weight("sin"), kHeads, kHeadDim, 0);
  gb.rope(k, gb.weight("cos"), gb.weight("sin"), kKvHeads, kHeadDim, 0);
  const int32_t a = gb.op(OpType::Attention, {q, k, v}, "attn", kHeads * kHeadDim, 0);
  gb.last().set(AttentionAttrs{kHeads, kKvHeads, kHeadDim, 0.25f});
  const int32_t o = gb.matmul(a, "o", "", "o_out", kHidden, 0);
  const int32_t h = gb.op(OpType::Add, {x, o}, "h", kHidden, 0);
  const int32_t g = gb.matmul(h, "gate", "", "g", kFfn, 0);
  const int32_t u = gb.matmul(h, "up", "", "u", kFfn, 0);
  gb.graph().output = gb.op(OpType::SiluMul, {g, u}, "mlp", kFfn, 0);
  b.g = std::move(gb.graph());
  return b;
}

const Op& op_making(const Graph& g, const std::string& value) {
  for (const Op& op : g.ops)
    if (g.values[size_t(op.output)].name == value) return op;
  throw std::runtime_error("no op makes " + value);
}

TEST(OpTable, AWellFormedBlockPasses) {
  const Block b = block();
  const auto infos = b.infos();
  for (const Op& op : b.g.ops)
    EXPECT_EQ(op_problem(b.g, op, infos), "")
        << op_name(op.type) << " -> " << b.g.values[size_t(op.output)].name;
}

TEST(OpTable, ShapeRulesRefuseInconsistentOps) {
  auto refused = [](Block b, auto&& mutate) {
    Op* target = nullptr;
    mutate(b, target);
    return !op_problem(b.g, *target, b.infos()).empty();
  };
  auto find = [](Block& b, const std::string& value) -> Op& {
    return const_cast<Op&>(op_making(b.g, value));
  };
  // A weight of the wrong width.
  EXPECT_TRUE(refused(block(), [&](Block& b, Op*& t) {
    b.shapes[size_t(b.index["q"])] = {kHeads * kHeadDim, kHidden + 1};
    t = &find(b, "q_out");
  }));
  // A bias of the wrong length.
  EXPECT_TRUE(refused(block(), [&](Block& b, Op*& t) {
    t = &find(b, "q_out");
    t->inputs.push_back(t->inputs[1]);  // the [N, K] matrix as a bias of N
  }));
  // A weight where rows of data belong.
  EXPECT_TRUE(refused(block(), [&](Block& b, Op*& t) {
    t = &find(b, "mlp");
    t->inputs[0] = b.g.find("norm");
  }));
  // Attention heads that do not tile the query width.
  EXPECT_TRUE(refused(block(), [&](Block& b, Op*& t) {
    t = &find(b, "attn");
    t->set(AttentionAttrs{kHeads + 1, kKvHeads, kHeadDim, 0.25f});
  }));
  // A grouped norm whose group does not divide the row.
  EXPECT_TRUE(refused(block(), [&](Block& b, Op*& t) {
    t = &find(b, "n");
    t->set(NormAttrs{.eps = 1e-6f, .group = 7});
  }));
  // Rope over an odd head_dim.
  EXPECT_TRUE(refused(block(), [&](Block& b, Op*& t) {
    t = &b.g.ops[4];
    ASSERT_EQ(t->type, OpType::Rope);
    t->set(RopeAttrs{.n_heads = kHeads * 2, .head_dim = kHeadDim / 2 + 1});
  }));
  // MRoPE sections that are negative (0: plain RoPE; positive: accepted, below).
  EXPECT_TRUE(refused(block(), [&](Block& b, Op*& t) {
    t = &b.g.ops[4];
    ASSERT_EQ(t->type, OpType::Rope);
    RopeAttrs a = t->rope();
    a.mrope_w = -1;
    t->set(a);
  }));
  EXPECT_FALSE(refused(block(), [&](Block& b, Op*& t) {
    t = &b.g.ops[4];
    RopeAttrs a = t->rope();
    a.mrope_h = a.mrope_w = 3;
    t->set(a);
    ASSERT_EQ(t->rope().mrope_h, 3);  // through the stored slots
  }));
  // An operand with another row count than the output.
  EXPECT_TRUE(refused(block(), [&](Block& b, Op*& t) {
    t = &find(b, "mlp");
    b.g.values[size_t(t->inputs[1])].shape[0] = kRows - 1;
  }));
  // An output declared wider than the op makes.
  EXPECT_TRUE(refused(block(), [&](Block& b, Op*& t) {
    t = &find(b, "h");
    b.g.values[size_t(t->output)].shape[1] = kHidden * 2;
  }));
  // Too many operands.
  EXPECT_TRUE(refused(block(), [&](Block& b, Op*& t) {
    t = &find(b, "mlp");
    t->inputs.push_back(t->inputs[0]);
  }));
}

// Qwen3.5's ops: a Gated DeltaNet mixer (conv, delta rule, gated norm) and the gated, partially
// rotated attention's pieces, well formed, then each broken in a way the loader must refuse.
Block delta_net_block() {
  constexpr int kHk = 2, kHv = 4, kDk = 8, kDv = 6, kTaps = 4, kWidth = 2 * kHk * kDk + kHv * kDv;
  Block b;
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape) {
    b.index[name] = int32_t(b.shapes.size());
    b.shapes.push_back(std::move(shape));
  };
  tensor("qkv", {kWidth, kHidden});
  tensor("z", {kHv * kDv, kHidden});
  tensor("a", {kHv, kHidden});
  tensor("b", {kHv, kHidden});
  tensor("conv", {kWidth, 1, kTaps});
  tensor("a_log", {kHv});
  tensor("dt_bias", {kHv});
  tensor("norm", {kDv});
  tensor("cos", {128, 2});  // partial rotary: 4 of 16 dims
  tensor("sin", {128, 2});
  GraphBuilder gb("t", kRows, b.index);
  const int32_t x = gb.activation("x", kHidden);
  gb.graph().input = x;
  const int32_t qkv = gb.matmul(x, "qkv", "", "qkv_out", kWidth, 0);
  const int32_t z = gb.matmul(x, "z", "", "z_out", kHv * kDv, 0);
  const int32_t a = gb.matmul(x, "a", "", "a_out", kHv, 0);
  const int32_t be = gb.matmul(x, "b", "", "b_out", kHv, 0);
  const int32_t u = gb.op(OpType::CausalConv1d, {qkv, gb.weight("conv")}, "conv_out", kWidth, 0);
  gb.last().set(ConvAttrs{.taps = kTaps});
  const int32_t o =
      gb.op(OpType::GatedDeltaRule, {u, a, be, gb.weight("a_log"), gb.weight("dt_bias")}, "delta",
            kHv * kDv, 0);
  gb.last().set(DeltaRuleAttrs{.hk = kHk, .hv = kHv, .dk = kDk, .dv = kDv});
  const int32_t n = gb.op(OpType::GatedRmsNorm, {o, z, gb.weight("norm")}, "gnorm", kHv * kDv, 0);
  gb.last().set(NormAttrs{.eps = 1e-6f, .group = kDv});
  const int32_t r = gb.activation("r", kHeads * kHeadDim);
  gb.rope(r, gb.weight("cos"), gb.weight("sin"), kHeads, kHeadDim, 0, 4);
  gb.graph().output = gb.op(OpType::SigmoidMul, {n, z}, "gated", kHv * kDv, 0);
  b.g = std::move(gb.graph());
  return b;
}

TEST(OpTable, DeltaNetOpsPassAndRefuseInconsistentOnes) {
  {
    const Block b = delta_net_block();
    const auto infos = b.infos();
    for (const Op& op : b.g.ops)
      EXPECT_EQ(op_problem(b.g, op, infos), "")
          << op_name(op.type) << " -> " << b.g.values[size_t(op.output)].name;
  }
  auto refused = [](auto&& mutate) {
    Block b = delta_net_block();
    Op* target = nullptr;
    mutate(b, target);
    return !op_problem(b.g, *target, b.infos()).empty();
  };
  auto find = [](Block& b, const std::string& value) -> Op& {
    return const_cast<Op&>(op_making(b.g, value));
  };
  auto rope_op = [](Block& b) -> Op& {
    for (Op& op : b.g.ops)
      if (op.type == OpType::Rope) return op;
    throw std::runtime_error("no rope");
  };
  // Conv taps the weight does not have; a conv with no layer (no state to address).
  EXPECT_TRUE(refused([&](Block& b, Op*& t) {
    t = &find(b, "conv_out");
    t->set(ConvAttrs{.taps = 3});
  }));
  EXPECT_TRUE(refused([&](Block& b, Op*& t) {
    t = &find(b, "conv_out");
    t->layer = -1;
  }));
  // Value heads that are no multiple of the key heads; dims that do not make the qkv width.
  EXPECT_TRUE(refused([&](Block& b, Op*& t) {
    t = &find(b, "delta");
    t->set(DeltaRuleAttrs{.hk = 3, .hv = 4, .dk = 8, .dv = 6});
  }));
  EXPECT_TRUE(refused([&](Block& b, Op*& t) {
    t = &find(b, "delta");
    t->set(DeltaRuleAttrs{.hk = 2, .hv = 4, .dk = 7, .dv = 6});
  }));
  // A_log of the wrong length; a and b swapped for activations of another width.
  EXPECT_TRUE(refused([&](Block& b, Op*& t) {
    b.shapes[size_t(b.index["a_log"])] = {5};
    t = &find(b, "delta");
  }));
  EXPECT_TRUE(refused([&](Block& b, Op*& t) {
    t = &find(b, "delta");
    t->inputs[1] = b.g.find("z_out");
  }));
  // A gated norm whose group does not divide the row or whose gate has another shape.
  EXPECT_TRUE(refused([&](Block& b, Op*& t) {
    t = &find(b, "gnorm");
    t->set(NormAttrs{.eps = 1e-6f, .group = 5});
  }));
  EXPECT_TRUE(refused([&](Block& b, Op*& t) {
    t = &find(b, "gnorm");
    t->inputs[1] = b.g.find("qkv_out");
  }));
  // Partial rotary: an odd rotated width, one wider than the head, a table of another width.
  for (int rot : {3, 18, 8})
    EXPECT_TRUE(refused([&](Block& b, Op*& t) {
      t = &rope_op(b);
      t->set(RopeAttrs{.n_heads = kHeads, .head_dim = kHeadDim, .rot_dim = rot});
    })) << rot;
}

// Qwen-VL's merger ops: View folds rows (the row count must divide), ConcatCols needs one row
// count; GeluTanh keeps the shape.
TEST(OpTable, ViewConcatAndGeluTanhShapes) {
  const std::map<std::string, int32_t> index;
  auto problem = [&](int32_t rows, int32_t factor, int32_t other_rows) {
    GraphBuilder gb("v", 8, index);
    const int32_t x = gb.activation("x", 6, rows);
    gb.graph().input = x;
    const int32_t t = gb.op(OpType::GeluTanh, {x}, "t", 6, 0, rows);
    const int32_t v = gb.op(OpType::View, {t}, "v", 6 * 4, 0, rows / 4);
    gb.last().set(ViewAttrs{.factor = factor});
    const int32_t o = gb.activation("o", 5, other_rows);
    gb.graph().output = gb.op(OpType::ConcatCols, {v, o}, "c", 6 * 4 + 5, 0, rows / 4);
    const Graph& g = gb.graph();
    const auto infos = value_infos(
        g, [](int32_t) { return std::vector<int64_t>{}; }, [](int32_t) { return int64_t(0); });
    std::string all;
    for (const Op& op : g.ops) all += op_problem(g, op, infos);
    return all;
  };
  EXPECT_EQ(problem(8, 4, 2), "");
  EXPECT_NE(problem(8, 3, 2), "");   // 8 rows do not fold by 3 (and 4 cols != 18)
  EXPECT_NE(problem(10, 4, 2), "");  // 10 rows do not fold by 4
  EXPECT_NE(problem(8, 4, 3), "");   // concatenated rows differ
}

// Which rows a run of fewer rows than the width fills: the rows joined by a View follow the
// run (a small image's merger runs on its own tokens), what is computed from them follows too,
// and a value of fixed height (here a table the concat reads) runs whole.
TEST(OpTable, JoinedRowsFollowTheRunsRows) {
  const std::map<std::string, int32_t> index = {{"w", 0}};
  GraphBuilder gb("v", 16, index);
  const int32_t x = gb.activation("x", 6);
  gb.graph().input = x;
  const int32_t t = gb.op(OpType::GeluTanh, {x}, "t", 6, 0);
  const int32_t v = gb.op(OpType::View, {t}, "v", 24, 0, 4);
  gb.last().set(ViewAttrs{.factor = 4});
  const int32_t m = gb.matmul(v, "w", "", "m", 5, 0);
  const int32_t table = gb.activation("table", 3, 2);
  const int32_t c = gb.op(OpType::ConcatCols, {m, m}, "c", 10, 0, 4);
  gb.graph().output = c;
  const Graph& g = gb.graph();
  const std::vector<int32_t> div = row_divisors(g);
  EXPECT_EQ(div[size_t(x)], 1);
  EXPECT_EQ(div[size_t(t)], 1);
  EXPECT_EQ(div[size_t(v)], 4);
  EXPECT_EQ(div[size_t(m)], 4);
  EXPECT_EQ(div[size_t(c)], 4);
  EXPECT_EQ(div[size_t(table)], 0);
  EXPECT_EQ(div[size_t(g.find("w"))], 0);
  EXPECT_EQ(live_rows(g, div, x, 8), 8);
  EXPECT_EQ(live_rows(g, div, v, 8), 2);
  EXPECT_EQ(live_rows(g, div, c, 16), 4);
  EXPECT_EQ(live_rows(g, div, table, 8), 2);
}

TEST(OpTable, CostsAreTheOpsArithmeticAndTraffic) {
  const Block b = block();
  const auto infos = b.infos();
  const CostArgs args{.rows = 3, .n_kv = 10, .kv_type = DType::F16};
  const OpCost q = op_cost(b.g, op_making(b.g, "q_out"), infos, args);
  EXPECT_DOUBLE_EQ(q.flops, 2.0 * 3 * kHidden * kHeads * kHeadDim);
  EXPECT_DOUBLE_EQ(q.weight_bytes, 2.0 * kHeads * kHeadDim * kHidden);
  EXPECT_DOUBLE_EQ(q.bytes, q.weight_bytes + 4.0 * 3 * (kHidden + kHeads * kHeadDim));

  const OpCost a = op_cost(b.g, op_making(b.g, "attn"), infos, args);
  EXPECT_DOUBLE_EQ(a.flops, 4.0 * 3 * 10 * kHeads * kHeadDim);
  EXPECT_DOUBLE_EQ(a.kv_bytes, 2.0 * 10 * kKvHeads * kHeadDim * 2);
  CostArgs q8 = args;
  q8.kv_type = DType::Q8;
  q8.per_row_kv = true;  // three rows, each over a cache of its own
  EXPECT_DOUBLE_EQ(op_cost(b.g, op_making(b.g, "attn"), infos, q8).kv_bytes,
                   2.0 * 10 * 3 * kKvHeads * (kHeadDim + 4));

  const OpCost rope = op_cost(b.g, b.g.ops[4], infos, args);
  EXPECT_EQ(rope.weight_bytes, 0);  // a row of each table per row, not the tables
  EXPECT_EQ(rope.flops, 0);
  const OpCost silu = op_cost(b.g, op_making(b.g, "mlp"), infos, args);
  EXPECT_DOUBLE_EQ(silu.bytes, 3 * 4.0 * 3 * kFfn);
}

TEST(OpTable, InPlaceRuleIsTheTables) {
  const Block b = block();
  EXPECT_EQ(op_def(OpType::SiluMul).in_place(op_making(b.g, "mlp")), op_making(b.g, "mlp").inputs);
  EXPECT_TRUE(op_def(OpType::MatMul).in_place(op_making(b.g, "q_out")).empty());
  EXPECT_TRUE(op_def(OpType::RmsNorm).in_place(op_making(b.g, "n")).empty());
}

// bench's bounds, read off the compiled golden Qwen2 through the op table, against the same
// figures from its config: 2 * params * n (+ the head once) + causal attention, and a decode
// step's weights + one token's K and V per layer.
// The Qwen-VL tower's cost at p patches has no part that is paid whatever the image: every op
// runs on the image's patches (or its p / 4 merged tokens), attention over them. So the cost is
// a p + b p^2, and the quadratic through three patch counts has no constant term (counting the
// mergers at the compiled width gave one).
TEST(ModelCost, QwenTowerCostFollowsTheImagesPatches) {
  const Model& m = test::compiled_model(test::qwen3vl_dir(), "f32");
  const ModelCost cost(m);
  const Graph* g = m.find_graph("qwen_vision");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->width % 16, 0);
  const double p1 = g->width / 4, p2 = g->width / 2, p3 = g->width;  // multiples of 4
  const double f1 = cost.qwen_vision_flops(int64_t(p1)), f2 = cost.qwen_vision_flops(int64_t(p2)),
               f3 = cost.qwen_vision_flops(int64_t(p3));
  ASSERT_GT(f1, 0);
  // Lagrange interpolation at 0.
  const double c = f1 * p2 * p3 / ((p1 - p2) * (p1 - p3)) + f2 * p1 * p3 / ((p2 - p1) * (p2 - p3)) +
                   f3 * p1 * p2 / ((p3 - p1) * (p3 - p2));
  EXPECT_NEAR(c, 0.0, f3 * 1e-9) << f1 << " " << f2 << " " << f3;
}

TEST(ModelCost, MatchesTheConfigsArithmetic) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", "f32");
  const LlmConfig& c = m.config();
  const double qdim = double(c.n_heads) * c.head_dim, kvdim = double(c.n_kv_heads) * c.head_dim;
  const double per_layer = double(c.hidden) * (qdim + 2 * kvdim) + qdim * c.hidden +
                           3.0 * double(c.hidden) * double(c.ffn);
  const double head = double(c.hidden) * double(c.vocab_size);
  const ModelCost cost(m);
  for (double n : {1.0, 7.0, 64.0})
    for (double past : {0.0, 100.0}) {
      const double want = 2 * per_layer * c.n_layers * n + 2 * head +
                          4 * qdim * c.n_layers * (n * past + n * (n + 1) / 2);
      EXPECT_NEAR(cost.prefill_flops(n, past), want, want * 1e-12) << n << " " << past;
    }
  const double kv_token = 2.0 * c.n_layers * kvdim * double(dtype_size(m.runtime_config().kv_type));
  EXPECT_DOUBLE_EQ(cost.kv_token_bytes(), kv_token);
  // f32 weights: every matrix, bias and norm once, the head, and one embedding row.
  double weights = 0;
  for (const TensorEntry& t : m.file().tensors())
    if (t.source == TensorSource::File && t.name.find("embed_tokens") == std::string::npos)
      weights += double(t.bytes);
  weights += 4.0 * c.hidden;
  if (m.file().find_tensor("lm_head.weight") < 0) weights += head * 4.0;  // tied: the table
  EXPECT_DOUBLE_EQ(cost.decode_weight_bytes(), weights);
  EXPECT_DOUBLE_EQ(cost.decode_bytes(10), weights + 10 * kv_token);
  EXPECT_EQ(cost.vision_flops(), 0);
}

}  // namespace
}  // namespace edgevl
