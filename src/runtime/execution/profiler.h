#pragma once
// Per-op profile of graph runs (DESIGN §1.7): wall time of every op the executor runs, with
// the FLOPs and bytes it moves, summed per (graph, op kind) for a table and optionally kept
// one event per op for a trace that opens in Perfetto / chrome://tracing.
//
// The executor times each op with a steady clock (two reads per op, ~50 ns against ops of
// microseconds to milliseconds); nothing is recorded unless a Profiler is attached to the
// session, so the token loop pays nothing by default. Kernels run across the pool inside an
// op, so an op's time is the wall time of all threads working on it.
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "format/evb.h"
#include "graph/graph.h"

namespace edgevl {

class Profiler {
 public:
  using Clock = std::chrono::steady_clock;

  // trace: also keep one event per op (up to max_events; later ones are counted, not kept).
  explicit Profiler(bool trace = false, size_t max_events = 2'000'000);

  // One op of `graph` ran from t0 to t1. `kind` names what ran (e.g. "matmul q8a8",
  // "self_attention"); `value` is the op's output value (its layer shows in the name).
  void record(const std::string& graph, const std::string& kind, const std::string& value,
              int32_t layer, Clock::time_point t0, Clock::time_point t1, double flops,
              double bytes);

  struct Row {
    std::string graph, kind;
    int64_t calls = 0;
    double ms = 0, flops = 0, bytes = 0;
  };
  // Summed per (graph, kind), graphs in first-seen order, kinds by time, largest first.
  std::vector<Row> rows() const;
  // The rows as an aligned text table with % of each graph's time, GFLOP/s and GB/s.
  std::string table() const;
  // Appends this profile's events as Chrome trace-event JSON objects (comma-separated) to
  // `out`: process `pid` named `process`, one thread track per graph.
  void append_trace(std::string& out, int pid, const std::string& process) const;
  void clear();
  bool empty() const { return totals_.empty(); }

 private:
  struct Event {
    uint32_t graph, kind;
    int32_t layer;
    std::string value;
    int64_t start_ns, dur_ns;
  };
  uint32_t intern(std::vector<std::string>& names, const std::string& s);

  bool trace_;
  size_t max_events_;
  Clock::time_point origin_;
  std::vector<std::string> graphs_, kinds_;
  std::vector<Row> totals_;  // one per (graph, kind) seen, in first-seen order
  std::vector<Event> events_;
  size_t dropped_ = 0;
};

// Writes a trace file that opens in Perfetto / chrome://tracing: one process per part.
void write_trace(const std::string& path,
                 const std::vector<std::pair<std::string, const Profiler*>>& parts);

// What the executor calls an op when profiling: the op name, and for a MatMul the weight's
// stored type and activation mode (e.g. "matmul q8a8", "matmul bf16": they pick the kernel).
std::string profile_kind(const Op& op, const TensorEntry* weight);

}  // namespace edgevl
