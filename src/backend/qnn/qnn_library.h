#pragma once
// Qualcomm's QNN HTP library, loaded at run time. Nothing is linked against it: the CPU build
// and every CPU user never need it. The folder holding libQnnHtp.so is EDGEVL_QNN_LIB_DIR, else
// the `onnxruntime_qnn` package of the venv scripts/setup.sh makes (build/qnn-venv), else the
// system's library path (a phone or a Linux-on-Snapdragon board ships it there).
#include <string>
#include <vector>

#include "backend/qnn/qnn_api.h"

namespace edgevl::qnn {

class QnnLibrary {
 public:
  // The process-wide library; throws Error naming every place it looked when it is absent.
  static const QnnLibrary& get();
  // Where it would be loaded from, or "" when nothing is found (tests skip on "").
  static std::string find_dir();

  const api::Interface& fn() const { return *fn_; }
  const api::ApiVersion& version() const { return version_; }
  const std::string& dir() const { return dir_; }
  const std::string& provider() const { return provider_; }

  // The message QNN gives for an error code, followed by the library's last logged errors
  // (its codes alone rarely say which tensor or op was refused).
  std::string describe(api::ErrorHandle e) const;
  // Throws Error("<what>: <describe(e)>") unless e is success.
  void check(api::ErrorHandle e, const std::string& what) const;

  api::Handle log() const { return log_; }

 private:
  explicit QnnLibrary(const std::string& dir);
  std::string dir_, provider_;
  const api::Interface* fn_ = nullptr;
  api::ApiVersion version_{};
  api::Handle log_ = nullptr;
};

// The library's recent error and warning lines (kept by its log callback), oldest first.
std::vector<std::string> recent_qnn_log();

}  // namespace edgevl::qnn
