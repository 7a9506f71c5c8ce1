// `edgevl`: one binary, one subcommand per job. Errors are edgevl::Error messages written for
// the user: printed on one line, exit status 1.
#include <cstdio>

#include "app/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"edgevl: compile hub LLM / VLM checkpoints into a context binary and run them"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "edgevl 0.1.0");
  edgevl::app::Command run;
  edgevl::app::add_compile(app, &run);
  edgevl::app::add_inspect(app, &run);
  edgevl::app::add_tokenize(app, &run);
  edgevl::app::add_run(app, &run);
  edgevl::app::add_chat(app, &run);
  edgevl::app::add_bench(app, &run);
  edgevl::app::add_synth(app, &run);
  edgevl::app::add_quant_report(app, &run);
  edgevl::app::add_serve(app, &run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run();
  } catch (const edgevl::Error& e) {
    std::fprintf(stderr, "edgevl: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "edgevl: error: %s\n", e.what());
    return 1;
  }
}
