#include "runtime/execution/profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/error.h"

namespace edgevl {

Profiler::Profiler(bool trace, size_t max_events)
    : trace_(trace), max_events_(max_events), origin_(Clock::now()) {}

uint32_t Profiler::intern(std::vector<std::string>& names, const std::string& s) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == s) return uint32_t(i);
  names.push_back(s);
  return uint32_t(names.size() - 1);
}

void Profiler::record(const std::string& graph, const std::string& kind, const std::string& value,
                      int32_t layer, Clock::time_point t0, Clock::time_point t1, double flops,
                      double bytes) {
  const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  Row* row = nullptr;
  for (Row& r : totals_)
    if (r.graph == graph && r.kind == kind) row = &r;
  if (!row) {
    totals_.push_back(Row{graph, kind});
    row = &totals_.back();
  }
  row->calls += 1;
  row->ms += ms;
  row->flops += flops;
  row->bytes += bytes;
  if (!trace_) return;
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  const auto ns = [&](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
  };
  events_.push_back(
      Event{intern(graphs_, graph), intern(kinds_, kind), layer, value, ns(t0), ns(t1) - ns(t0)});
}

std::vector<Profiler::Row> Profiler::rows() const {
  std::vector<std::string> order;
  for (const Row& r : totals_)
    if (std::find(order.begin(), order.end(), r.graph) == order.end()) order.push_back(r.graph);
  std::vector<Row> out = totals_;
  std::stable_sort(out.begin(), out.end(), [&](const Row& a, const Row& b) {
    const auto ga = std::find(order.begin(), order.end(), a.graph);
    const auto gb = std::find(order.begin(), order.end(), b.graph);
    if (ga != gb) return ga < gb;
    return a.ms > b.ms;
  });
  return out;
}

std::string Profiler::table() const {
  std::map<std::string, double> graph_ms;
  for (const Row& r : totals_) graph_ms[r.graph] += r.ms;
  std::string out = fmt::format("| {:<9} | {:<22} | {:>8} | {:>10} | {:>6} | {:>9} | {:>8} |\n",
                                "graph", "op", "calls", "ms", "%", "GFLOP/s", "GB/s");
  out += fmt::format("|{:-<11}|{:-<24}|{:-<10}|{:-<12}|{:-<8}|{:-<11}|{:-<10}|\n", "", "", "", "",
                     "", "", "");
  for (const Row& r : rows()) {
    const double s = r.ms / 1e3;
    const auto rate = [&](double x) {
      return x > 0 && s > 0 ? fmt::format("{:.1f}", x / s / 1e9) : std::string("-");
    };
    out += fmt::format("| {:<9} | {:<22} | {:>8} | {:>10.2f} | {:>5.1f}% | {:>9} | {:>8} |\n",
                       r.graph, r.kind, r.calls, r.ms, 100.0 * r.ms / graph_ms[r.graph],
                       rate(r.flops), rate(r.bytes));
  }
  return out;
}

void Profiler::append_trace(std::string& out, int pid, const std::string& process) const {
  // Chrome trace-event format: "X" (complete) events in microseconds; a process per profiler
  // (e.g. a bench test) and a thread per graph, named by metadata events.
  const auto sep = [&] { out += out.empty() ? "" : ",\n"; };
  sep();
  out += fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":"{}"}}}})", pid,
                     process);
  for (size_t g = 0; g < graphs_.size(); ++g) {
    sep();
    out +=
        fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":"{}"}}}})",
                    pid, g + 1, graphs_[g]);
  }
  for (const Event& e : events_) {
    sep();
    out += fmt::format(R"({{"ph":"X","pid":{},"tid":{},"name":"{}","ts":{:.3f},"dur":{:.3f},)"
                       R"("args":{{"value":"{}","layer":{}}}}})",
                       pid, e.graph + 1, kinds_[e.kind], double(e.start_ns) / 1e3,
                       double(e.dur_ns) / 1e3, e.value, e.layer);
  }
  if (dropped_ > 0) {
    sep();
    out += fmt::format(R"({{"ph":"i","pid":{},"name":"{} events dropped","ts":0,"s":"p"}})", pid,
                       dropped_);
  }
}

void write_trace(const std::string& path,
                 const std::vector<std::pair<std::string, const Profiler*>>& parts) {
  std::string body;
  for (size_t i = 0; i < parts.size(); ++i)
    parts[i].second->append_trace(body, int(i + 1), parts[i].first);
  const std::string text = "{\"traceEvents\":[\n" + body + "\n]}\n";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  check(f != nullptr, "cannot write the trace file '{}'", path);
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok &= std::fclose(f) == 0;
  check(ok, "writing the trace file '{}' failed (disk full?)", path);
}

void Profiler::clear() {
  totals_.clear();
  events_.clear();
  graphs_.clear();
  kinds_.clear();
  dropped_ = 0;
  origin_ = Clock::now();
}

std::string profile_kind(const Op& op, const TensorEntry* weight) {
  if (op.type != OpType::MatMul || weight == nullptr) return op_name(op.type);
  return "matmul " + weight->type_name();
}

}  // namespace edgevl
