#pragma once
// Read-only memory mapping of a whole file. Weights are used straight from these pages,
// so a loaded model costs page cache, not heap.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace edgevl {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws edgevl::Error naming the path when it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string; throws naming the path.
std::string read_text_file(const std::filesystem::path& path);

}  // namespace edgevl
