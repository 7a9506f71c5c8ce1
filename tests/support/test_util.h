#pragma once
// Small helpers shared by the tests.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"

namespace edgevl::test {

// Runs `fn`, expects an edgevl::Error, returns its message ("" and a failure otherwise).
template <class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an edgevl::Error";
  return "";
}

// Single-quotes a path for the shell.
inline std::string shell_quote(const std::filesystem::path& p) {
  std::string s(1, '\'');
  s.append(p.string()).push_back('\'');  // (append: g++ 12 warns falsely on "'" + s + "'")
  return s;
}

}  // namespace edgevl::test
