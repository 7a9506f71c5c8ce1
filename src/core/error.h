#pragma once
// One error type for the whole engine. Messages are written for the user: they name the
// file, the offset and what was expected, so the CLI can print `what()` on one line.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace edgevl {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// The prompt and the tokens asked for do not fit the context: the server answers 400, the
// C API EDGEVL_ERR_CONTEXT_FULL.
class ContextFullError : public Error {
 public:
  using Error::Error;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

// Checks a condition that depends on input data (never compiled out, unlike assert).
template <class... Args>
void check(bool ok, fmt::format_string<Args...> f, Args&&... args) {
  if (!ok) throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace edgevl
