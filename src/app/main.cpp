// `edgevl`: one binary, one subcommand per job. Errors are edgevl::Error messages written for
// the user: printed on one line, exit status 1.
#include <cstdio>
#include <string_view>

#include "app/commands.h"
#include "core/closest_names.h"
#include "core/error.h"

namespace {

// A name within this many edits of what was typed is offered as "did you mean".
size_t near_enough(const std::string& typed) {
  return std::max<size_t>(2, typed.size() / 3);
}

std::string suggestion(const std::string& typed, const std::vector<std::string>& names) {
  const auto best = edgevl::closest_names(typed, names, 1);
  if (best.empty() || edgevl::edit_distance(typed, best[0]) > near_enough(typed)) return "";
  return fmt::format("; did you mean '{}'?", best[0]);
}

// When CLI11 refuses the command line: an unknown subcommand or option, named with the closest
// valid one ("" when the error is of another kind, left to CLI11's own message).
std::string unknown_name_hint(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  std::vector<std::string> commands;
  CLI::App* sub = nullptr;
  for (CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) {
    commands.push_back(c->get_name());
    if (c->get_name() == argv[1]) sub = c;
  }
  if (!sub) {
    std::string list;
    for (const auto& c : commands) list += (list.empty() ? "" : ", ") + c;
    return fmt::format("unknown command '{}'{} (commands: {})", argv[1],
                       suggestion(argv[1], commands), list);
  }
  std::vector<std::string> options;
  for (const CLI::Option* o : sub->get_options()) {
    for (const auto& l : o->get_lnames()) options.push_back("--" + l);
    for (const auto& s : o->get_snames()) options.push_back("-" + s);
  }
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-' || (a[1] != '-' && a.size() > 2)) continue;  // values, -n4
    a = a.substr(0, a.find('='));
    if (sub->get_option_no_throw(a) != nullptr) continue;
    return fmt::format("{}: unknown option '{}'{} (edgevl {} --help lists them)", sub->get_name(),
                       a, suggestion(a, options), sub->get_name());
  }
  return "";
}

}  // namespace

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
    const bool refused = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ||
                         dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
    if (const std::string hint = refused ? unknown_name_hint(app, argc, argv) : ""; !hint.empty()) {
      std::fprintf(stderr, "edgevl: error: %s\n", hint.c_str());
      return e.get_exit_code();
    }
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
