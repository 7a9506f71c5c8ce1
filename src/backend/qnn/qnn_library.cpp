#include "backend/qnn/qnn_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>

#include "core/error.h"

namespace edgevl::qnn {

namespace fs = std::filesystem;

namespace {

std::mutex g_log_mutex;
std::deque<std::string> g_log;  // the last lines at warning level or above

void log_callback(const char* fmt, uint32_t level, uint64_t, va_list args) {
  if (level > 2) return;  // 1 error, 2 warning
  char line[1024];
  vsnprintf(line, sizeof line, fmt, args);
  std::string s = std::string(level == 1 ? "E " : "W ") + line;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_log.push_back(std::move(s));
  if (g_log.size() > 16) g_log.pop_front();
  if (std::getenv("EDGEVL_QNN_LOG")) fprintf(stderr, "qnn: %s\n", g_log.back().c_str());
}

// The candidate folders, in the order they are tried.
std::vector<fs::path> candidate_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("EDGEVL_QNN_LIB_DIR"); env && *env) dirs.emplace_back(env);
  // The venv scripts/setup.sh makes, relative to the working directory and to the executable
  // (tests run from build/, the CLI from anywhere).
  std::vector<fs::path> roots = {fs::current_path() / "build", fs::current_path()};
  std::error_code ec;
  if (fs::path exe = fs::read_symlink("/proc/self/exe", ec); !ec)
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
      roots.push_back(p);
  // (build/ itself, or a tree beside it such as build-asan/, finds the one setup.sh made.)
  for (const fs::path& r : roots)
    for (const fs::path& lib : {r / "qnn-venv" / "lib", r / "build" / "qnn-venv" / "lib"}) {
      if (!fs::is_directory(lib, ec)) continue;
      for (const auto& py : fs::directory_iterator(lib, ec))
        dirs.push_back(py.path() / "site-packages" / "onnxruntime_qnn");
    }
  return dirs;
}

}  // namespace

std::vector<std::string> recent_qnn_log() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  return {g_log.begin(), g_log.end()};
}

namespace {

// Whether the ELF file at p is built for the machine this code runs on (the venv's x86_64
// library is also visible to an AArch64 build run under qemu).
bool native_elf(const fs::path& p) {
#if defined(__x86_64__)
  constexpr uint16_t kMachine = 62;  // EM_X86_64
#elif defined(__aarch64__)
  constexpr uint16_t kMachine = 183;  // EM_AARCH64
#else
  constexpr uint16_t kMachine = 0;
#endif
  FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) return false;
  unsigned char h[20] = {};
  const bool read = std::fread(h, 1, sizeof h, f) == sizeof h;
  std::fclose(f);
  return read && h[0] == 0x7f && h[1] == 'E' && h[2] == 'L' && h[3] == 'F' &&
         uint16_t(h[18] | h[19] << 8) == kMachine;
}

}  // namespace

std::string QnnLibrary::find_dir() {
  std::error_code ec;
  for (const fs::path& d : candidate_dirs())
    if (fs::is_regular_file(d / "libQnnHtp.so", ec) && native_elf(d / "libQnnHtp.so"))
      return d.string();
  return "";
}

const QnnLibrary& QnnLibrary::get() {
  static const QnnLibrary lib(find_dir());
  return lib;
}

QnnLibrary::QnnLibrary(const std::string& dir) : dir_(dir) {
  std::string where = dir.empty() ? std::string("libQnnHtp.so") : dir + "/libQnnHtp.so";
  if (!dir.empty()) {
    // The PyPI wheel's libraries need the libc++ it bundles next door; load those first, global,
    // so the HTP library's own dependencies resolve to them.
    fs::path deps = fs::path(dir).parent_path() / "onnxruntime_qnn.libs";
    std::error_code ec;
    std::vector<fs::path> libs;
    for (const auto& e : fs::directory_iterator(deps, ec)) libs.push_back(e.path());
    // libunwind, then libc++abi, then libc++: each needs the one before.
    auto rank = [](const fs::path& p) {
      std::string n = p.filename().string();
      return n.rfind("libunwind", 0) == 0 ? 0 : n.rfind("libc++abi", 0) == 0 ? 1 : 2;
    };
    std::sort(libs.begin(), libs.end(),
              [&](const fs::path& a, const fs::path& b) { return rank(a) < rank(b); });
    for (const fs::path& l : libs) dlopen(l.c_str(), RTLD_NOW | RTLD_GLOBAL);
  }
  // The library prints a banner to standard output while it starts; standard output is the
  // CLI's (JSON answers), so it goes to standard error until the library is up.
  struct StdoutToStderr {
    int saved;
    StdoutToStderr() : saved((fflush(stdout), dup(1))) { dup2(2, 1); }
    ~StdoutToStderr() {
      fflush(stdout);
      dup2(saved, 1);
      close(saved);
    }
  } redirect;
  void* h = dlopen(where.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::string tried;
    for (const fs::path& d : candidate_dirs()) tried += "\n  " + d.string();
    fail(
        "cannot load the QNN HTP library ({}).\nInstall it with `scripts/setup.sh --qnn` (pip "
        "installs onnxruntime-qnn into build/qnn-venv) or set EDGEVL_QNN_LIB_DIR to the folder "
        "holding libQnnHtp.so. Looked in:{}",
        dlerror(), tried.empty() ? std::string("\n  (the system library path)") : tried);
  }
  auto get_providers = reinterpret_cast<api::GetProvidersFn>(dlsym(h, "QnnInterface_getProviders"));
  edgevl::check(get_providers != nullptr, "{}: no QnnInterface_getProviders symbol", where);
  const api::Provider** providers = nullptr;
  uint32_t count = 0;
  edgevl::check(get_providers(&providers, &count) == api::kSuccess && count > 0,
                "{}: QnnInterface_getProviders returned no provider", where);
  const api::Provider* p = providers[0];
  edgevl::check(p->api_version.core.major == 2,
                "{}: QNN core API {}.{} is not the 2.x edgevl is written against", where,
                p->api_version.core.major, p->api_version.core.minor);
  edgevl::check(p->backend_id == 6, "{}: backend id {} is not HTP (6)", where, p->backend_id);
  fn_ = &p->fn;
  version_ = p->api_version;
  provider_ = p->name ? p->name : "";
  this->check(fn_->log_create(log_callback, 2, &log_), "QnnLog_create");
}

std::string QnnLibrary::describe(api::ErrorHandle e) const {
  const char* msg = nullptr;
  std::string s = fmt::format("QNN error {}", api::error_code(e));
  if (fn_->error_get_message && fn_->error_get_message(e, &msg) == api::kSuccess && msg)
    s += fmt::format(" ({})", msg);
  std::vector<std::string> errors;
  for (const std::string& line : recent_qnn_log())
    if (line.rfind("E ", 0) == 0) errors.push_back(line.substr(2));
  size_t first = errors.size() > 4 ? errors.size() - 4 : 0;
  for (size_t i = first; i < errors.size(); ++i) s += "\n  qnn: " + errors[i];
  return s;
}

void QnnLibrary::check(api::ErrorHandle e, const std::string& what) const {
  if (e != api::kSuccess) fail("{}: {}", what, describe(e));
}

}  // namespace edgevl::qnn
