#pragma once
// A private temporary directory (mkdtemp under $TMPDIR), removed with everything in it when the
// object goes away, also when compilation or a report fails half-way.
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "core/error.h"

namespace edgevl {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "edgevl-XXXXXX").string();
    check(mkdtemp(tmpl.data()) != nullptr, "cannot create a temporary directory in {}",
          std::filesystem::temp_directory_path().string());
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace edgevl
