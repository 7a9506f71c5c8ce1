// `edgevl bench`: llama-bench style throughput of one .evb on this CPU.
//
//   ppN       prefill N random token ids from an empty context        -> tok/s, GFLOP/s
//   tgN@dD    prefill D tokens (untimed), then N greedy decode steps  -> tok/s, GB/s
//   tgN@dDxB  (--batch) B sequences, each prefilled with its own D tokens (untimed), then N
//             batched decode steps (Engine::decode_batch, greedy per sequence)
//             -> aggregate tok/s (B * N / time), GB/s (weights once + B sequences' KV per step)
//   --image   the vision tower and time to first token (app/bench_image.h: InternVL's tile,
//             Qwen-VL's images at each --image-size)
//
// Every test runs once untimed (warm-up), then --reps timed repetitions: mean and sample sd.
// FLOP and byte counts come from the compiled graphs (the ops and weight shapes the runtime
// actually executes), so they follow whatever the compiler emitted.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "app/bench_image.h"
#include "app/commands.h"
#include "core/clock.h"
#include "core/error.h"
#include "runtime/decoding/generate.h"
#include "runtime/decoding/sampler.h"
#include "runtime/execution/htp_delegate.h"
#include "runtime/execution/isa.h"
#include "runtime/execution/model_cost.h"
#include "runtime/execution/profiler.h"
#include "runtime/execution/session.h"
#include "runtime/execution/vision_encoder.h"

namespace edgevl::app {

namespace {

struct BenchOpts {
  std::string isa;  // --isa / EDGEVL_ISA
  std::string model;
  int threads = 0;
  int32_t ctx = 0;
  std::string backend = "cpu";
  std::vector<int32_t> pp = {512};
  std::vector<int32_t> tg = {64};
  std::vector<int32_t> depth = {0};
  std::vector<int32_t> batch;   // empty: the single-sequence tgN@dD tests
  std::vector<int32_t> verify;  // bench --verify: speculative verification passes instead
  bool image = false;
  std::vector<std::string> image_sizes = {"448x448", "1344x896"};  // Qwen-VL's images
  int reps = 5;
  bool json = false;
  uint64_t seed = 1;
  bool profile = false;
  std::string trace;  // Chrome trace-event JSON of every profiled op
};

double params_of(const Model& m, bool vision) {
  double n = 0;
  for (const auto& t : m.file().tensors()) {
    const bool is_vision = t.name.rfind("vision", 0) == 0 || t.name.rfind("mlp1", 0) == 0;
    if (is_vision == vision) n += double(t.numel());
  }
  return n;
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, int32_t vocab, int64_t n) {
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = d(rng);
  return ids;
}

int run_bench(const BenchOpts& o) {
  check(o.reps >= 1, "--reps must be at least 1 (got {})", o.reps);
  Model model(o.model);
  Session session(model, SessionOptions{o.threads, o.ctx, o.backend});
  const LlmConfig& cfg = model.config();
  const ModelCost cost(model);
  const int32_t ctx = session.context();
  std::mt19937_64 rng(o.seed);

  // Validate every test against the context before running any of them.
  for (int32_t n : o.pp) {
    check(n > 0, "--pp: token counts must be positive (got {})", n);
    check(n <= ctx, "pp{} needs {} tokens but the context of {} is {} tokens", n, n, o.model, ctx);
  }
  for (int32_t d : o.depth) check(d >= 0, "--depth must be >= 0 (got {})", d);
  for (int32_t n : o.tg) {
    check(n > 0, "--tg: token counts must be positive (got {})", n);
    for (int32_t d : o.depth)
      check(int64_t(d) + n <= ctx,
            "tg{}@d{} needs {} + {} = {} tokens but the context of {} is {} tokens (lower "
            "--depth, or compile with a larger --context)",
            n, d, d, n, int64_t(d) + n, o.model, ctx);
  }
  for (int32_t b : o.batch)
    check(b >= 1 && b <= session.engine().max_batch(),
          "--batch {}: {} runs batches of 1 to {} sequences (recompile with --batch {})", b,
          o.model, session.engine().max_batch(), std::max(b, 1));
  if (o.image)
    check(VisionEncoder::takes_images(model), "--image: {} is a text-only model (no vision tower)",
          o.model);
  for (const std::string& sz : o.image_sizes) parse_image_size(sz);  // refused before any test

  nlohmann::json tests = nlohmann::json::array();
  std::vector<BenchRow> rows;
  // One profile per test, recorded over its timed repetitions only.
  std::vector<std::pair<std::string, std::unique_ptr<Profiler>>> profiles;
  auto profiler_for = [&](const std::string& name) -> Profiler* {
    if (!o.profile && o.trace.empty()) return nullptr;
    profiles.emplace_back(name, std::make_unique<Profiler>(!o.trace.empty()));
    return profiles.back().second.get();
  };
  auto progress = [&](const std::string& name) {
    if (!o.json) std::fprintf(stderr, "running %s ...\n", name.c_str());
  };

  for (int32_t n : o.pp) {
    const std::string name = fmt::format("pp{}", n);
    progress(name);
    const std::vector<int32_t> ids = random_ids(rng, cfg.vocab_size, n);
    std::vector<double> tps;
    Profiler* prof = profiler_for(name);
    for (int r = 0; r <= o.reps; ++r) {
      session.reset();
      session.engine().set_profiler(r > 0 ? prof : nullptr);
      const auto t0 = Clock::now();
      session.eval_tokens(ids);
      const double ms = ms_since(t0);
      if (r > 0) tps.push_back(n * 1000.0 / ms);
    }
    const BenchStats s = bench_stats(tps);
    const double gflop_s = cost.prefill_flops(n, 0) / (n / s.mean) / 1e9;
    tests.push_back(
        {{"name", name}, {"tok_s", s.mean}, {"sd", s.sd}, {"gflop_s", gflop_s}, {"samples", tps}});
    rows.push_back({name, fmt::format("{:.2f} ± {:.2f} tok/s", s.mean, s.sd),
                    fmt::format("{:.1f} GFLOP/s", gflop_s)});
  }

  for (int32_t d : o.depth)
    for (int32_t n : o.tg) {
      if (!o.batch.empty()) break;  // the batched form below
      const std::string name = fmt::format("tg{}@d{}", n, d);
      progress(name);
      const std::vector<int32_t> prefix = random_ids(rng, cfg.vocab_size, d);
      const int32_t first = random_ids(rng, cfg.vocab_size, 1)[0];
      std::vector<double> tps;
      Profiler* prof = profiler_for(name);
      for (int r = 0; r <= o.reps; ++r) {
        session.reset();
        session.engine().set_profiler(nullptr);
        if (d > 0) session.eval_tokens(prefix);
        session.engine().set_profiler(r > 0 ? prof : nullptr);
        int32_t id = first;
        const auto t0 = Clock::now();
        for (int32_t i = 0; i < n; ++i) id = argmax(session.eval_tokens({&id, 1}));
        const double ms = ms_since(t0);
        if (r > 0) tps.push_back(n * 1000.0 / ms);
      }
      const BenchStats s = bench_stats(tps);
      // Mean bytes per step over KV lengths d+1 .. d+n.
      const double bytes = cost.decode_bytes(d + (n + 1) / 2.0);
      const double gb_s = bytes * s.mean / 1e9;
      tests.push_back({{"name", name},
                       {"tok_s", s.mean},
                       {"sd", s.sd},
                       {"gb_s", gb_s},
                       {"bytes_per_token", bytes},
                       {"samples", tps}});
      rows.push_back({name, fmt::format("{:.2f} ± {:.2f} tok/s", s.mean, s.sd),
                      fmt::format("{:.2f} GB/s", gb_s)});
    }

  // Batched decode: the B sequences share the bench session's engine (their KV caches are
  // sessions of their own); each has a prefix of its own, and its own greedy continuation.
  std::vector<std::unique_ptr<Session>> seqs;
  for (int32_t b : o.batch)
    while (int32_t(seqs.size()) < b)
      seqs.push_back(std::make_unique<Session>(session.engine(), SessionOptions{0, o.ctx}));
  std::vector<float> batch_logits;
  for (int32_t d : o.depth)
    for (int32_t n : o.tg)
      for (int32_t b : o.batch) {
        const std::string name = fmt::format("tg{}@d{}x{}", n, d, b);
        progress(name);
        std::vector<std::vector<int32_t>> prefixes;
        for (int32_t i = 0; i < b; ++i) prefixes.push_back(random_ids(rng, cfg.vocab_size, d));
        const std::vector<int32_t> first = random_ids(rng, cfg.vocab_size, b);
        std::vector<Session*> batch;
        for (int32_t i = 0; i < b; ++i) batch.push_back(seqs[size_t(i)].get());
        batch_logits.resize(size_t(b) * size_t(cfg.vocab_size));
        std::vector<double> tps, step_ms;
        Profiler* prof = profiler_for(name);
        for (int r = 0; r <= o.reps; ++r) {
          session.engine().set_profiler(nullptr);
          for (int32_t i = 0; i < b; ++i) {
            seqs[size_t(i)]->reset();
            if (d > 0) seqs[size_t(i)]->eval_tokens(prefixes[size_t(i)]);
          }
          session.engine().set_profiler(r > 0 ? prof : nullptr);
          std::vector<int32_t> ids = first;
          const auto t0 = Clock::now();
          for (int32_t s = 0; s < n; ++s) {
            session.engine().decode_batch(batch, ids, batch_logits.data());
            for (int32_t i = 0; i < b; ++i)
              ids[size_t(i)] = argmax(
                  std::span<const float>(batch_logits.data() + size_t(i) * size_t(cfg.vocab_size),
                                         size_t(cfg.vocab_size)));
          }
          const double ms = ms_since(t0);
          if (r > 0) {
            tps.push_back(double(b) * n * 1000.0 / ms);
            step_ms.push_back(ms / n);
          }
        }
        const BenchStats s = bench_stats(tps);
        // Per step: every weight once, and each sequence's KV (mean length d + (n + 1) / 2).
        const double bytes =
            cost.decode_weight_bytes() + double(b) * (d + (n + 1) / 2.0) * cost.kv_token_bytes();
        const double steps_s = s.mean / b;
        const double gb_s = bytes * steps_s / 1e9;
        tests.push_back({{"name", name},
                         {"batch", b},
                         {"tok_s", s.mean},
                         {"sd", s.sd},
                         {"tok_s_per_sequence", steps_s},
                         {"step_ms", bench_stats(step_ms).mean},
                         {"gb_s", gb_s},
                         {"weight_gb_s", cost.decode_weight_bytes() * steps_s / 1e9},
                         {"bytes_per_step", bytes},
                         {"samples", tps}});
        rows.push_back({name, fmt::format("{:.2f} ± {:.2f} tok/s", s.mean, s.sd),
                        fmt::format("{:.2f} GB/s, {:.1f} ms/step", gb_s, 1000.0 / steps_s)});
      }

  if (o.image) {
    ImageBenchOpts io{o.reps, {}, profiler_for, progress};
    for (const std::string& sz : o.image_sizes) io.sizes.push_back(parse_image_size(sz));
    bench_images(session, io, rng, tests, rows);
  }

  session.engine().set_profiler(nullptr);
  if (!o.trace.empty()) {
    std::vector<std::pair<std::string, const Profiler*>> parts;
    for (const auto& [name, p] : profiles) parts.emplace_back(name, p.get());
    write_trace(o.trace, parts);
  }

  const IsaReport isa = isa_report();
  nlohmann::json kernels = nlohmann::json::object();
  for (const auto& [k, v] : isa.kernel_paths) kernels[k] = v;
  const double llm_params = params_of(model, false), vis_params = params_of(model, true);
  nlohmann::json mj = {{"path", o.model},
                       {"arch", cfg.family},
                       {"file_bytes", model.file().file_size()},
                       {"llm_params", llm_params},
                       {"vision_params", vis_params},
                       {"decode_weight_bytes", cost.decode_weight_bytes()},
                       {"vocab", cfg.vocab_size},
                       {"hidden", cfg.hidden},
                       {"layers", cfg.n_layers},
                       {"context", ctx},
                       {"prefill_chunk", model.runtime_config().prefill_chunk},
                       {"kv_type", std::string(dtype_name(model.runtime_config().kv_type))}};
  const double rss = peak_rss_mb();
  if (o.json) {
    nlohmann::json j = {{"tests", tests},
                        {"kernels", kernels},
                        {"cpu", isa.cpu_features},
                        {"cpu_model", isa.cpu_model},
                        {"isa", isa.level},
                        {"peak_rss_mb", rss},
                        {"load_ms", model.load_ms()},
                        {"threads", session.threads()},
                        {"reps", o.reps},
                        {"model", mj}};
    if (o.profile) {
      // Per test: its ops summed over the timed repetitions (ms are totals, not per rep).
      nlohmann::json pj = nlohmann::json::object();
      for (const auto& [name, p] : profiles) {
        nlohmann::json ops = nlohmann::json::array();
        for (const Profiler::Row& r : p->rows())
          ops.push_back({{"graph", r.graph},
                         {"op", r.kind},
                         {"calls", r.calls},
                         {"ms", r.ms},
                         {"flops", r.flops},
                         {"bytes", r.bytes}});
        pj[name] = ops;
      }
      j["profile"] = pj;
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("model   %s: %s, %.0fM LLM params%s, %s, context %d, kv %s\n", o.model.c_str(),
              cfg.family.c_str(), llm_params / 1e6,
              vis_params > 0 ? fmt::format(" + {:.0f}M vision", vis_params / 1e6).c_str() : "",
              human_bytes(model.file().file_size()).c_str(), ctx,
              std::string(dtype_name(model.runtime_config().kv_type)).c_str());
  std::printf("cpu     %s [%s]\n", isa.cpu_model.c_str(), isa.cpu_features.c_str());
  std::string kp;
  for (const auto& [k, v] : isa.kernel_paths)
    kp += fmt::format("{}{}={}", kp.empty() ? "" : " ", k, v);
  std::printf("isa     %s\nkernels %s\n", isa.level.c_str(), kp.c_str());
  if (const HtpBackend* h = session.engine().htp()) {
    int ops = 0, htp_ops = 0, graphs = 0;
    for (const HtpGraphReport& r : h->report())
      ops += r.ops, htp_ops += r.htp_ops, graphs += r.segments;
    std::printf(
        "htp     %s (%s, %.1f ms): %d of %d ops in %d HTP graphs; on x86 the QNN "
        "simulator runs them (its times are not a device's)\n",
        h->target().c_str(), h->from_binary() ? "context binary" : "built at load", h->load_ms(),
        htp_ops, ops, graphs);
  }
  std::printf("threads %d | load %.1f ms | peak RSS %.1f MB | %d reps after 1 warm-up\n\n",
              session.threads(), model.load_ms(), rss, o.reps);
  // Pads by code points, not bytes ("±" is two bytes in UTF-8).
  auto code_points = [](const std::string& t) {
    size_t cps = 0;
    for (unsigned char ch : t) cps += (ch & 0xC0) != 0x80;
    return cps;
  };
  auto cell = [&](const std::string& t, size_t w) {
    const size_t cps = code_points(t);
    return t + std::string(w > cps ? w - cps : 0, ' ');
  };
  // Columns as wide as their widest cell (at least 12 / 26 / 32).
  size_t wn = 12, wv = 26, wr = 32;
  for (const auto& r : rows)
    wn = std::max(wn, code_points(r.name)), wv = std::max(wv, code_points(r.value)),
    wr = std::max(wr, code_points(r.rate));
  std::printf("| %s | %s | %s |\n", cell("test", wn).c_str(), cell("mean ± sd", wv).c_str(),
              cell("rate", wr).c_str());
  std::printf("|%s|%s|%s|\n", std::string(wn + 2, '-').c_str(), std::string(wv + 2, '-').c_str(),
              std::string(wr + 2, '-').c_str());
  for (const auto& r : rows)
    std::printf("| %s | %s | %s |\n", cell(r.name, wn).c_str(), cell(r.value, wv).c_str(),
                cell(r.rate, wr).c_str());
  if (o.profile)
    for (const auto& [name, p] : profiles)
      std::printf("\nprofile of %s (%d timed reps; ms are totals over them):\n%s", name.c_str(),
                  o.reps, p->table().c_str());
  if (!o.trace.empty()) std::printf("\ntrace written to %s\n", o.trace.c_str());
  return 0;
}

}  // namespace

void add_bench(CLI::App& app, Command* run) {
  auto* cmd = app.add_subcommand("bench", "Measure prefill, decode and vision throughput");
  auto o = std::make_shared<BenchOpts>();
  cmd->add_option("-m,--model", o->model, "Model binary (.evb)")->required();
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)");
  cmd->add_option("--backend", o->backend,
                  "cpu, or htp / htp-v73 ... htp-v81: the Qualcomm HTP (its simulator on x86) "
                  "runs the ops it supports, the CPU the rest; --profile shows each HTP graph "
                  "as 'htp'")
      ->default_str("cpu");
  cmd->add_option("--ctx", o->ctx, "Context length (at most the compiled one)");
  cmd->add_option("--pp", o->pp, "Prefill sizes in tokens, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--tg", o->tg, "Decode lengths in tokens, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--depth", o->depth, "Context depths for the decode tests, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch", o->batch,
                  "Batched decode: sequences per step, comma-separated (tgN@dDxB tests; at most "
                  "the binary's compile --batch)")
      ->delimiter(',');
  cmd->add_option("--verify", o->verify,
                  "Speculative verification: time a pass of k + 1 rows (k drafted tokens) on the "
                  "batched and prefill paths against one decode step, at each --depth; "
                  "comma-separated k (replaces the other tests)")
      ->delimiter(',');
  cmd->add_flag("--image", o->image, "Also time the vision tower and time-to-first-token (VLMs)");
  cmd->add_option("--image-size", o->image_sizes,
                  "With --image on a Qwen-VL model: the random images' WIDTHxHEIGHT, "
                  "comma-separated (ttft uses the first; InternVL always times one 448x448 tile)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--reps", o->reps, "Timed repetitions per test")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random token ids and pixels")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->add_flag(
      "--profile", o->profile,
      "Per-op time, GFLOP/s and GB/s of every test or --verify pass (summed over its timed reps)");
  cmd->add_option("--trace", o->trace,
                  "Write every timed op as a Chrome trace (open in Perfetto / chrome://tracing)");
  add_isa_option(cmd, &o->isa);
  cmd->callback([=] {
    *run = [=] {
      apply_isa(o->isa);
      if (!o->verify.empty())
        return run_verify_bench(VerifyBenchOpts{o->model, o->threads, o->ctx, o->verify, o->depth,
                                                o->reps, o->seed, o->json, o->profile, o->trace});
      return run_bench(*o);
    };
  });
}

}  // namespace edgevl::app
