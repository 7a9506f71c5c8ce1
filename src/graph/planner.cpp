#include "graph/planner.h"

#include <algorithm>
#include <map>

#include "graph/op_table.h"

namespace edgevl {

namespace {
constexpr int64_t kAlign = 64;
int64_t align_up(int64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

struct Interval {
  int first = -1;  // op index defining the value
  int last = -1;   // last op index reading it
};
}  // namespace

void plan_arena(Graph& g) {
  const int n_ops = int(g.ops.size());
  std::vector<Interval> live(g.values.size());
  for (int i = 0; i < n_ops; ++i) {
    const Op& op = g.ops[i];
    for (int32_t in : op.inputs) live[in].last = i;
    if (live[op.output].first < 0) live[op.output].first = i;
    live[op.output].last = std::max(live[op.output].last, i);
    // A matmul's product before its epilogue lives within the op (executor.cpp).
    if (op.type == OpType::MatMul && op.matmul().epilogue != Epilogue::kNone)
      live[op.matmul().pre] = {i, i};
  }
  live[g.output].last = n_ops;  // read by the runtime after the graph ends
  live[g.input].first = -1;     // written by the runtime before the first op

  // Free list of [offset, size) holes in an arena that grows as needed.
  std::map<int64_t, int64_t> holes;
  int64_t top = 0;
  auto allocate = [&](int64_t size) {
    for (auto it = holes.begin(); it != holes.end(); ++it) {
      if (it->second >= size) {
        const int64_t off = it->first;
        const int64_t rest = it->second - size;
        holes.erase(it);
        if (rest > 0) holes[off + size] = rest;
        return off;
      }
    }
    // Grow: merge with a hole that ends at the top.
    if (!holes.empty()) {
      auto last = std::prev(holes.end());
      if (last->first + last->second == top) {
        const int64_t off = last->first;
        holes.erase(last);
        top = off + size;
        return off;
      }
    }
    const int64_t off = top;
    top += size;
    return off;
  };
  auto release = [&](int64_t off, int64_t size) {
    auto [it, ok] = holes.emplace(off, size);
    (void)ok;
    auto next = std::next(it);
    if (next != holes.end() && it->first + it->second == next->first) {
      it->second += next->second;
      holes.erase(next);
    }
    if (it != holes.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        holes.erase(it);
      }
    }
  };

  // Values whose slot is needed before any op runs (the input) come first.
  std::vector<std::vector<int32_t>> born(n_ops + 1), dies(n_ops + 2);
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].kind != ValueKind::Activation) continue;
    if (live[v].last < 0 && int32_t(v) != g.input) continue;  // never used
    born[live[v].first + 1].push_back(int32_t(v));
    dies[std::max(live[v].last, live[v].first) + 1].push_back(int32_t(v));
  }
  // An op whose table entry allows it (op_table.h, `in_place`) writes its output over an input
  // of the same size that dies with it: the output lines are then already in the cache (a
  // separate output costs a read-for-ownership stream: at 512-row prefill chunks, SiluMul and
  // Add move 10 MB per operand), and the arena is smaller.
  std::vector<char> handed_over(g.values.size(), 0);
  auto in_place_source = [&](int32_t v) -> int32_t {
    const int i = live[v].first;
    if (i < 0 || g.ops[size_t(i)].output != v) return -1;
    const Op& op = g.ops[size_t(i)];
    for (int32_t in : op_def(op.type).in_place(op))
      if (in >= 0 && g.values[in].kind == ValueKind::Activation && in != g.output &&
          in != g.input && live[in].last == i && !handed_over[size_t(in)] &&
          g.values[in].bytes() == g.values[v].bytes())
        return in;
    return -1;
  };
  for (int step = 0; step <= n_ops; ++step) {
    // Values of their own first: an in-place output may take the slot of a product born with it.
    std::vector<int32_t> sources;
    for (int32_t v : born[step]) sources.push_back(in_place_source(v));
    for (int pass = 0; pass < 2; ++pass)
      for (size_t k = 0; k < born[step].size(); ++k) {
        const int32_t v = born[step][k], src = sources[k];
        if ((src >= 0) != (pass == 1)) continue;
        if (src >= 0) {
          g.values[v].offset = g.values[src].offset;
          handed_over[size_t(src)] = 1;
          continue;
        }
        g.values[v].offset = allocate(align_up(int64_t(g.values[v].bytes())));
      }
    // Values whose last reader is op step-1 are free once it ran; outputs of op `step`
    // are allocated above before the inputs dying at step+1 are released, so an op never
    // writes over its own inputs (but for the in-place ones above, whose slot lives on).
    for (int32_t v : dies[step])
      if (!handed_over[size_t(v)])
        release(g.values[v].offset, align_up(int64_t(g.values[v].bytes())));
  }
  g.arena_bytes = top;
}

}  // namespace edgevl
