#pragma once
// Subcommands of the `edgevl` binary. Each registers its options on the CLI11 app and
// returns the function that runs it.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace edgevl::app {

using Command = std::function<int()>;

void add_compile(CLI::App& app, Command* run);
void add_inspect(CLI::App& app, Command* run);
void add_tokenize(CLI::App& app, Command* run);
void add_run(CLI::App& app, Command* run);
void add_chat(CLI::App& app, Command* run);
void add_bench(CLI::App& app, Command* run);
void add_synth(CLI::App& app, Command* run);
void add_quant_report(CLI::App& app, Command* run);
void add_serve(CLI::App& app, Command* run);

// --isa LEVEL on a command that runs kernels (default: $EDGEVL_ISA, else the best level of this
// CPU); apply_isa selects it before the command runs, with a clear error when the CPU lacks a
// feature of that level.
void add_isa_option(CLI::App* cmd, std::string* isa);
void apply_isa(const std::string& isa);

// bench --verify (app/bench_verify.cpp): the cost of a speculative verification pass of k + 1
// rows against one decode step, per depth.
struct VerifyBenchOpts {
  std::string model;
  int threads = 0;
  int32_t ctx = 0;
  std::vector<int32_t> ks, depth;
  int reps = 5;
  uint64_t seed = 1;
  bool json = false;
  bool profile = false;  // per-op table of every pass (summed over its timed reps)
  std::string trace;     // Chrome trace of every timed op
};
int run_verify_bench(const VerifyBenchOpts& o);

// Peak resident set size of this process, in MB (from getrusage).
double peak_rss_mb();
// Human-readable byte count: "1.23 GB".
std::string human_bytes(uint64_t n);

}  // namespace edgevl::app
