// `edgevl bench --verify K,...`: what a speculative verification pass costs against one decode
// step (runtime/decoding/speculative.h). Verifying k drafted tokens evaluates k + 1 rows (the last
// token and the drafts); both paths of Engine::verify are timed (the batched graphs when the
// rows fit them, the prefill graph always), as medians over the repetitions, taken round-robin,
// because the machines this runs on are shared.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "app/commands.h"
#include "core/clock.h"
#include "core/error.h"
#include "runtime/execution/isa.h"
#include "runtime/execution/profiler.h"
#include "runtime/execution/session.h"

namespace edgevl::app {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int run_verify_bench(const VerifyBenchOpts& o) {
  check(o.reps >= 1, "--reps must be at least 1 (got {})", o.reps);
  Model model(o.model);
  Session s(model, SessionOptions{o.threads, o.ctx});
  Engine& e = s.engine();
  const int32_t vocab = model.config().vocab_size;
  for (int32_t k : o.ks) check(k >= 1, "--verify: drafted tokens must be >= 1 (got {})", k);
  const int32_t kmax = *std::max_element(o.ks.begin(), o.ks.end());
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<float> logits(size_t(kmax + 1) * size_t(vocab));
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::pair<std::string, std::unique_ptr<Profiler>>> profiles;  // kept for the trace
  const IsaReport isa = isa_report();
  std::printf("model %s, %d threads, max_batch %d\nisa %s [%s], quantized matmuls %s\n",
              o.model.c_str(), e.threads(), e.max_batch(), isa.level.c_str(),
              isa.cpu_features.c_str(), isa.quant_kernels.c_str());
  std::printf("%-8s %-6s %-8s %10s %10s\n", "depth", "rows", "path", "ms", "x decode");
  for (int32_t depth : o.depth) {
    check(int64_t(depth) + kmax + 1 <= s.context(),
          "--verify {} at depth {} needs {} tokens; the context is {}", kmax, depth,
          depth + kmax + 1, s.context());
    s.reset();
    std::vector<int32_t> ctx(size_t(std::max(depth, 1)));
    for (auto& t : ctx) t = id(rng);
    if (depth > 0) s.eval_tokens(ctx);
    // The passes to time at this depth: the plain decode step (decode + head graphs), then per
    // k the batched path (several passes when the rows exceed the width) and the prefill path.
    struct Pass {
      int32_t k, rows;
      VerifyPath path;
      const char* name;
      std::vector<double> ms;
      std::unique_ptr<Profiler> prof;
    };
    std::vector<Pass> passes;
    passes.push_back({0, 1, VerifyPath::Auto, "decode", {}, {}});
    for (int32_t k : o.ks) {
      if (e.max_batch() > 1) passes.push_back({k, k + 1, VerifyPath::Batch, "batch", {}, {}});
      passes.push_back({k, k + 1, VerifyPath::Prefill, "prefill", {}, {}});
    }
    if (o.profile || !o.trace.empty())
      for (Pass& p : passes) p.prof = std::make_unique<Profiler>(!o.trace.empty());
    // Round-robin over the passes, one warm-up round: every ratio compares passes timed in the
    // same seconds, which on a shared machine moves them together.
    std::vector<int32_t> ids;
    for (int r = 0; r <= o.reps; ++r)
      for (Pass& p : passes) {
        ids.resize(size_t(p.rows));
        for (auto& t : ids) t = id(rng);
        e.set_profiler(r > 0 ? p.prof.get() : nullptr);
        const auto t0 = Clock::now();
        if (p.path == VerifyPath::Auto)
          s.eval_tokens(ids);
        else
          e.verify(s, ids, logits.data(), p.path);
        const double dt = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        e.set_profiler(nullptr);
        s.truncate(depth);  // rolled back: every pass starts at this depth
        if (r > 0) p.ms.push_back(dt);
      }
    const double step = median(passes[0].ms);
    for (const Pass& p : passes) {
      const double ms = median(p.ms);
      std::printf("%-8d %-6d %-8s %10.2f %10.2f\n", depth, p.rows, p.name, ms, ms / step);
      out.push_back({{"depth", depth},
                     {"drafted", p.k},
                     {"rows", p.rows},
                     {"path", p.name},
                     {"ms", ms},
                     {"vs_decode", ms / step}});
    }
    for (Pass& p : passes) {
      if (!p.prof) continue;
      const std::string name = fmt::format("d{}-{}-{}rows", depth, p.name, p.rows);
      if (o.profile && !o.json)
        std::printf("\nprofile of %s (%d timed reps; ms are totals over them):\n%s", name.c_str(),
                    o.reps, p.prof->table().c_str());
      profiles.emplace_back(name, std::move(p.prof));
    }
  }
  if (!o.trace.empty()) {
    std::vector<std::pair<std::string, const Profiler*>> parts;
    for (const auto& [name, p] : profiles) parts.emplace_back(name, p.get());
    write_trace(o.trace, parts);
  }
  if (o.json) std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace edgevl::app
