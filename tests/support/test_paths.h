#pragma once
// Where tests find their data. Real data from ../shared/data is optional: tests that need
// it call shared_data_or_skip() and skip, saying why, when it is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/temp_dir.h"

namespace edgevl::test {

inline std::filesystem::path source_dir() {
  return EDGEVL_SOURCE_DIR;
}
inline std::filesystem::path fixtures_dir() {
  return source_dir() / "tests" / "fixtures";
}
inline std::filesystem::path shared_data_dir() {
  return EDGEVL_SHARED_DATA;
}
inline std::filesystem::path cli_path() {
  return EDGEVL_CLI;
}

// Returns the path of ../shared/data/<sub>, or an empty path when absent (then call
// GTEST_SKIP in the test body with the message from shared_data_missing()).
inline std::filesystem::path shared_data(const std::string& sub) {
  auto p = shared_data_dir() / sub;
  return std::filesystem::exists(p) ? p : std::filesystem::path();
}
inline std::string shared_data_missing(const std::string& sub) {
  return "real data " + (shared_data_dir() / sub).string() +
         " is absent (it lives beside the repository, in ../shared/data); skipping";
}

// A fresh temporary directory removed at scope exit.
using edgevl::TempDir;  // a private directory removed with its contents (core/temp_dir.h)

}  // namespace edgevl::test
