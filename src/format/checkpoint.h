#pragma once
// A hub checkpoint directory: one `model.safetensors`, shards listed by
// `model.safetensors.index.json`, or (without an index) every *.safetensors in the directory.
// All files stay mapped for the checkpoint's lifetime; TensorViews point into them.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/safetensors.h"

namespace edgevl {

class Checkpoint {
 public:
  // Opens and validates every file; throws edgevl::Error naming the directory and file.
  explicit Checkpoint(const std::filesystem::path& dir);

  const TensorView* find(std::string_view name) const;
  // Throws "checkpoint DIR: tensor 'X' missing".
  const TensorView& get(std::string_view name) const;
  // Sorted.
  std::vector<std::string> names() const;
  const std::filesystem::path& dir() const { return dir_; }
  // Throws ONE error listing every name that is absent (so a user sees the whole problem).
  void require(const std::vector<std::string>& names) const;
  // The files opened, in the order they were opened.
  std::vector<std::filesystem::path> files() const;

 private:
  void add_all(const SafetensorsFile& f);

  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*, std::less<>> tensors_;
};

}  // namespace edgevl
