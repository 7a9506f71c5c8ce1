#pragma once
// The kernel level and this CPU, as the CLI, `bench` and the C API see them: the one door from
// above the runtime to the CPU backend's level choice and reporting.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace edgevl {

// Every kernel level this build knows, lowest first ("scalar", "avx2", ... on x86-64;
// "scalar", "neon", ... on AArch64).
std::vector<std::string> isa_levels();
// Selects the level every kernel uses ("best" or "": the highest this CPU runs, or EDGEVL_ISA's).
// Throws edgevl::Error naming the missing CPU features, or the known levels for an unknown name.
// Not thread-safe against kernels running concurrently.
void select_isa(std::string_view level);
const char* active_isa();

// What runs here: the CPU, its features, the active level and the kernel each family takes.
struct IsaReport {
  std::string cpu_model;      // /proc/cpuinfo's model name
  std::string cpu_features;   // e.g. "avx2 fma f16c ... avx512bf16"
  std::string level;          // the active level
  std::string quant_kernels;  // the level the quantized matmuls run at
  std::vector<std::pair<std::string, std::string>> kernel_paths;  // {"matmul_f16", "avx512"}
};
IsaReport isa_report();

int default_thread_count();  // physical cores usable by this process

}  // namespace edgevl
