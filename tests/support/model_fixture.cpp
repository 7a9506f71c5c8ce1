#include "support/model_fixture.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "compiler/compile.h"
#include "core/mapped_file.h"
#include "support/test_paths.h"

namespace edgevl::test {

namespace {
struct Cache {
  TempDir dir;
  std::map<std::string, std::filesystem::path> paths;
  std::map<std::string, std::unique_ptr<Model>> models;
};
Cache& cache() {
  static Cache c;
  return c;
}
}  // namespace

std::filesystem::path compiled_path(const std::filesystem::path& dir, const std::string& quant,
                                    const std::string& kv) {
  const std::string key = dir.string() + "|" + quant + "|" + kv;
  auto& c = cache();
  auto it = c.paths.find(key);
  if (it != c.paths.end()) return it->second;
  const auto out = c.dir.path() / (dir.filename().string() + "-" + quant + "-kv" + kv + ".evb");
  compiler::CompileOptions o;
  o.input = dir;
  o.output = out;
  o.quant = quant;
  o.kv = kv;
  o.context = 0;         // min(max_position_embeddings, 4096)
  o.prefill_chunk = 16;  // several chunks per prompt, and a masked last one
  compiler::compile_model(o);
  return c.paths[key] = out;
}

const Model& compiled_model(const std::filesystem::path& dir, const std::string& quant,
                            const std::string& kv) {
  const std::string key = dir.string() + "|" + quant + "|" + kv;
  auto& c = cache();
  auto it = c.models.find(key);
  if (it != c.models.end()) return *it->second;
  return *(c.models[key] = std::make_unique<Model>(compiled_path(dir, quant, kv)));
}

CliResult run_cli(const std::string& args, const std::string& stdin_text) {
  TempDir tmp;
  const auto out = tmp.path() / "out", err = tmp.path() / "err", in = tmp.path() / "in";
  std::ofstream(in) << stdin_text;
  const std::string cmd = cli_path().string() + " " + args + " >" + out.string() + " 2>" +
                          err.string() + " <" + in.string();
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text_file(out);
  r.err = read_text_file(err);
  return r;
}

}  // namespace edgevl::test
