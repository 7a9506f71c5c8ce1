#pragma once
// Compiles checkpoint directories into temporary .evb files once per test binary and
// shares them between tests.
#include <filesystem>
#include <memory>
#include <string>

#include "runtime/model.h"

namespace edgevl::test {

// Compiles `dir` at `quant` (cached per (dir, quant) for the life of the process) and loads it.
const Model& compiled_model(const std::filesystem::path& dir, const std::string& quant);
// Path of the compiled binary for (dir, quant).
std::filesystem::path compiled_path(const std::filesystem::path& dir, const std::string& quant);

// Runs the CLI with arguments (a shell-quoted string); captures stdout and stderr.
struct CliResult {
  int exit_code = -1;
  std::string out, err;
};
// `stdin_text` is fed to the command's standard input (empty: /dev/null).
CliResult run_cli(const std::string& args, const std::string& stdin_text = "");

}  // namespace edgevl::test
