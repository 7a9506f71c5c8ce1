#pragma once
// Minimal NumPy .npy (v1.0, little-endian, C order) for float32 / int32 arrays: the
// format of --dump files and of golden fixtures, readable by numpy.load.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace edgevl {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // int32 arrays are converted on read
};

void write_npy(const std::filesystem::path& path, std::span<const float> data,
               std::span<const int64_t> shape);
NpyArray read_npy(const std::filesystem::path& path);

}  // namespace edgevl
