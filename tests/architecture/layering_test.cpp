// The folder layering of src/ (README "How it is built"): each folder includes only the folders
// below it. Read from the #include lines of every source file, so a new include that breaks a
// rule fails here, naming the file and the line. Also: no document or source names an internal
// work round by number (work is named by date and commit).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "support/test_paths.h"

namespace edgevl {
namespace {

namespace fs = std::filesystem;

// Which src/ folders each folder may include (itself always).
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> rules = {
      {"core", {}},
      {"format", {"core"}},
      {"graph", {"core"}},
      {"backend", {"core", "graph"}},  // the QNN backend lowers graph IR
      {"text", {"core"}},
      {"vision", {"core"}},
      {"models", {"core", "format", "graph", "text"}},
      {"runtime", {"core", "format", "graph", "backend", "text", "vision"}},
      {"compiler", {"core", "format", "graph", "backend", "text", "vision", "models", "runtime"}},
      {"synth", {"core", "format", "graph", "text", "models", "compiler"}},
      // The CLI and the C API reach kernels, text and vision only through the runtime.
      {"app", {"core", "runtime", "compiler", "synth"}},
      {"capi", {"core", "runtime"}},
  };
  return rules;
}

std::vector<fs::path> sources(const fs::path& root) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".cpp" || ext == ".h" || ext == ".inc"))
      out.push_back(e.path());
  }
  return out;
}

TEST(Layering, EachFolderIncludesOnlyTheFoldersBelowIt) {
  const fs::path src = test::source_dir() / "src";
  const std::regex include(R"re(^\s*#\s*include\s*"([a-z_0-9]+)/)re");
  int files = 0;
  for (const fs::path& p : sources(src)) {
    const std::string folder = fs::relative(p, src).begin()->string();
    const auto rule = allowed().find(folder);
    ASSERT_NE(rule, allowed().end()) << "src/" << folder << " has no layering rule: add one";
    ++files;
    std::ifstream f(p);
    std::string line;
    for (int n = 1; std::getline(f, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const std::string to = m[1];
      EXPECT_TRUE(to == folder || rule->second.count(to))
          << fs::relative(p, src).string() << ":" << n << ": src/" << folder
          << " may not include src/" << to << " (" << line << ")";
    }
  }
  EXPECT_GT(files, 100);
}

// A module is a .h with its .cpp; module A uses B when A.h or A.cpp includes B.h. A cycle of
// uses means neither side can be read, changed or tested without the other.
std::map<std::string, std::set<std::string>> module_uses(const fs::path& src) {
  const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)\.h")re");
  std::map<std::string, std::set<std::string>> uses;
  for (const fs::path& p : sources(src)) {
    if (p.extension() == ".inc") continue;
    fs::path rel = fs::relative(p, src);
    const std::string mod = rel.replace_extension().string();
    uses[mod];
    std::ifstream f(p);
    std::string line;
    while (std::getline(f, line)) {
      std::smatch m;
      if (std::regex_search(line, m, include) && m[1] != mod &&
          fs::exists(src / (m[1].str() + ".h")))
        uses[mod].insert(m[1]);
    }
  }
  return uses;
}

TEST(Layering, NoModuleIncludesItselfInALoop) {
  const auto uses = module_uses(test::source_dir() / "src");
  // Loops that predate this test, to be taken apart; none may be added.
  const std::set<std::set<std::string>> known = {
      {"text/tokenizer", "text/tokenizer_impl"},
      {"compiler/compile", "compiler/import", "compiler/quant_report"},
  };
  // Tarjan's strongly connected components: each one of more than one module is a loop.
  std::map<std::string, int> index, low;
  std::vector<std::string> stack;
  std::set<std::string> on_stack;
  int next = 0;
  std::function<void(const std::string&)> visit = [&](const std::string& v) {
    index[v] = low[v] = next++;
    stack.push_back(v);
    on_stack.insert(v);
    for (const std::string& w : uses.at(v)) {
      if (!uses.count(w)) continue;
      if (!index.count(w)) {
        visit(w);
        low[v] = std::min(low[v], low[w]);
      } else if (on_stack.count(w)) {
        low[v] = std::min(low[v], index[w]);
      }
    }
    if (low[v] != index[v]) return;
    std::set<std::string> component;
    for (std::string w; w != v;) {
      w = stack.back();
      stack.pop_back();
      on_stack.erase(w);
      component.insert(w);
    }
    if (component.size() > 1 && !known.count(component)) {
      std::string names;
      for (const std::string& c : component) names += " " + c;
      ADD_FAILURE() << "these modules include each other in a loop:" << names;
    }
  };
  for (const auto& [mod, _] : uses)
    if (!index.count(mod)) visit(mod);
}

TEST(Layering, NoWorkRoundIsNamedByNumber) {
  const fs::path root = test::source_dir();
  std::vector<fs::path> files = sources(root / "src");
  for (const char* doc : {"README.md", "bench/README.md", "CONTRIBUTING.md"})
    if (fs::exists(root / doc)) files.push_back(root / doc);
  if (fs::exists(root / "docs"))
    for (const auto& e : fs::recursive_directory_iterator(root / "docs"))
      if (e.is_regular_file()) files.push_back(e.path());
  const std::regex round(R"(\b(sessions?|work rounds?) [0-9]+)", std::regex::icase);
  for (const fs::path& p : files) {
    std::ifstream f(p);
    std::string line;
    for (int n = 1; std::getline(f, line); ++n)
      EXPECT_FALSE(std::regex_search(line, round))
          << fs::relative(p, root).string() << ":" << n << ": " << line;
  }
}

}  // namespace
}  // namespace edgevl
