#pragma once
// Reading and writing safetensors files (the hub's weight format).
//
// Layout: 8-byte little-endian header length N, N bytes of JSON, then the data area. The
// JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} with offsets
// relative to the data area, plus an optional "__metadata__" string map. Everything in the
// header is untrusted: the parser checks each length and offset against the file before a
// TensorView is handed out, and every error names the file, the offset and what was
// expected.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"

namespace edgevl {

struct TensorView {
  std::string name;
  std::string dtype;  // safetensors dtype string: F32 F16 BF16 I8 ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // not necessarily aligned: the header length is arbitrary
  size_t nbytes = 0;
  std::string file;        // path of the file holding the tensor (for error messages)
  size_t file_offset = 0;  // absolute offset of the first byte in that file
  int64_t numel() const;
};

// Bytes per element of a safetensors dtype string, or 0 when the dtype is unknown.
size_t safetensors_dtype_size(std::string_view dtype);

class SafetensorsFile {
 public:
  // Maps the file and validates the whole header; throws edgevl::Error otherwise.
  explicit SafetensorsFile(const std::filesystem::path& p);
  // Parses bytes owned by the caller (which must outlive this object); `name` stands in for
  // the path in errors. Used by the fuzzer and by tests of in-memory files.
  SafetensorsFile(std::span<const uint8_t> bytes, std::string name);

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // In header order of data offsets (i.e. file order).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return name_; }

 private:
  void parse(std::span<const uint8_t> bytes);

  MappedFile map_;
  std::string name_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// Converts a tensor to float; throws "X: tensor T has dtype I8; edgevl reads F32, F16, BF16"
// otherwise. `out` holds t.numel() floats.
void tensor_to_f32(const TensorView& t, float* out);

struct TensorToWrite {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

void write_safetensors(const std::filesystem::path& p, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Streams a safetensors file whose tensor list is known up front: the header goes out first,
// then each tensor's bytes in declaration order, so multi-GB files never sit in memory.
// Writes to "<path>.partial" and renames on finish(), so an interrupted run never leaves a
// file that looks complete.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
  };
  SafetensorsWriter(const std::filesystem::path& p, std::vector<Entry> entries,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends bytes of the current tensor (may be called several times per tensor).
  void write(const void* data, size_t n);
  // Bytes the current tensor still expects; the writer moves on when it reaches 0.
  size_t remaining_in_tensor() const;
  const Entry& current() const;
  void finish();

 private:
  void advance();

  std::filesystem::path path_, tmp_;
  std::vector<Entry> entries_;
  std::vector<size_t> sizes_;
  size_t cur_ = 0;
  size_t cur_left_ = 0;
  std::FILE* f_ = nullptr;
  bool finished_ = false;
};

}  // namespace edgevl
