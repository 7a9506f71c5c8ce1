// `edgevl bench --verify K,...`: what a speculative verification pass costs against one decode
// step (runtime/speculative.h). Verifying k drafted tokens evaluates k + 1 rows (the last
// token and the drafts); both paths of Engine::verify are timed (the batched graphs when the
// rows fit them, the prefill graph always), as medians over the repetitions because the
// machines this runs on are shared.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "app/commands.h"
#include "core/clock.h"
#include "core/error.h"
#include "runtime/session.h"

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
  std::printf("model %s, %d threads, max_batch %d\n", o.model.c_str(), e.threads(), e.max_batch());
  std::printf("%-8s %-6s %-8s %10s %10s\n", "depth", "rows", "path", "ms", "x decode");
  for (int32_t depth : o.depth) {
    check(int64_t(depth) + kmax + 1 <= s.context(),
          "--verify {} at depth {} needs {} tokens; the context is {}", kmax, depth,
          depth + kmax + 1, s.context());
    s.reset();
    std::vector<int32_t> ctx(size_t(std::max(depth, 1)));
    for (auto& t : ctx) t = id(rng);
    if (depth > 0) s.eval_tokens(ctx);
    // One pass of `rows` rows at this depth, rolled back after: median ms over the reps (after
    // one untimed warm-up).
    auto time_pass = [&](int32_t rows, VerifyPath path) {
      std::vector<int32_t> ids(static_cast<size_t>(rows));
      std::vector<double> ms;
      for (int r = 0; r <= o.reps; ++r) {
        for (auto& t : ids) t = id(rng);
        const auto t0 = Clock::now();
        if (rows == 1 && path == VerifyPath::Auto)
          s.eval_tokens(ids);  // the plain decode step (decode + head graphs)
        else
          e.verify(s, ids, logits.data(), path);
        const double dt = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        s.truncate(depth);
        if (r > 0) ms.push_back(dt);
      }
      return median(ms);
    };
    const double step = time_pass(1, VerifyPath::Auto);
    auto report = [&](int32_t k, int32_t rows, const char* path, double ms) {
      std::printf("%-8d %-6d %-8s %10.2f %10.2f\n", depth, rows, path, ms, ms / step);
      out.push_back({{"depth", depth},
                     {"drafted", k},
                     {"rows", rows},
                     {"path", path},
                     {"ms", ms},
                     {"vs_decode", ms / step}});
    };
    report(0, 1, "decode", step);
    for (int32_t k : o.ks) {
      const int32_t rows = k + 1;
      if (rows <= e.max_batch()) report(k, rows, "batch", time_pass(rows, VerifyPath::Batch));
      report(k, rows, "prefill", time_pass(rows, VerifyPath::Prefill));
    }
  }
  if (o.json) std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace edgevl::app
