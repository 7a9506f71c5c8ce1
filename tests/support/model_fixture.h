#pragma once
// Compiles checkpoint directories into temporary .evb files once per test binary and
// shares them between tests.
#include <filesystem>
#include <memory>
#include <string>

#include "runtime/execution/model.h"

namespace edgevl::test {

// Compiles `dir` at `quant` with KV cache type `kv` (cached per (dir, quant, kv) for the life of
// the process) and loads it.
const Model& compiled_model(const std::filesystem::path& dir, const std::string& quant,
                            const std::string& kv = "auto");
// Path of the compiled binary for (dir, quant, kv).
std::filesystem::path compiled_path(const std::filesystem::path& dir, const std::string& quant,
                                    const std::string& kv = "auto");

// Runs the CLI with arguments (a shell-quoted string); captures stdout and stderr.
struct CliResult {
  int exit_code = -1;
  std::string out, err;
};
// `stdin_text` is fed to the command's standard input (empty: /dev/null).
CliResult run_cli(const std::string& args, const std::string& stdin_text = "");

}  // namespace edgevl::test
