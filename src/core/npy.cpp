#include "core/npy.h"

#include <fstream>
#include <string>

#include "core/error.h"
#include "core/mapped_file.h"

namespace edgevl {

void write_npy(const std::filesystem::path& path, std::span<const float> data,
               std::span<const int64_t> shape) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + ")";
  dict += ", }";
  // Header length makes magic(6)+version(2)+len(2)+dict a multiple of 64, ending in '\n'.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("{}: cannot open for writing", path.string());
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.write(magic, 8);
  const uint16_t hlen = uint16_t(dict.size());
  out.write(reinterpret_cast<const char*>(&hlen), 2);
  out.write(dict.data(), std::streamsize(dict.size()));
  out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size_bytes()));
  if (!out) fail("{}: write failed", path.string());
}

NpyArray read_npy(const std::filesystem::path& path) {
  MappedFile f(path);
  const std::string name = path.string();
  check(f.size() >= 10 && std::memcmp(f.data(), "\x93NUMPY", 6) == 0, "{}: not a .npy file", name);
  const uint8_t major = f.data()[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = f.data()[8] | (size_t(f.data()[9]) << 8);
    hstart = 10;
  } else {
    check(f.size() >= 12, "{}: truncated header", name);
    hlen = f.data()[8] | (size_t(f.data()[9]) << 8) | (size_t(f.data()[10]) << 16) |
           (size_t(f.data()[11]) << 24);
    hstart = 12;
  }
  check(hstart + hlen <= f.size(), "{}: truncated header", name);
  const std::string h(reinterpret_cast<const char*>(f.data() + hstart), hlen);
  const bool f4 = h.find("'<f4'") != std::string::npos;
  const bool i4 = h.find("'<i4'") != std::string::npos;
  const bool i8 = h.find("'<i8'") != std::string::npos;
  check(f4 || i4 || i8, "{}: only <f4, <i4, <i8 arrays are supported", name);
  check(h.find("'fortran_order': False") != std::string::npos, "{}: fortran order unsupported",
        name);
  NpyArray a;
  const size_t lp = h.find('('), rp = h.find(')');
  check(lp != std::string::npos && rp != std::string::npos && rp > lp, "{}: no shape", name);
  std::string dims = h.substr(lp + 1, rp - lp - 1);
  size_t count = 1;
  for (size_t p = 0; p < dims.size();) {
    while (p < dims.size() && (dims[p] == ' ' || dims[p] == ',')) ++p;
    if (p >= dims.size()) break;
    size_t e = p;
    while (e < dims.size() && dims[e] >= '0' && dims[e] <= '9') ++e;
    check(e > p, "{}: bad shape", name);
    a.shape.push_back(std::stoll(dims.substr(p, e - p)));
    count *= size_t(a.shape.back());
    p = e;
  }
  const size_t esize = i8 ? 8 : 4;
  const size_t off = hstart + hlen;
  check(off + count * esize <= f.size(), "{}: expected {} elements, file too short", name, count);
  a.data.resize(count);
  const uint8_t* p = f.data() + off;
  for (size_t i = 0; i < count; ++i) {
    if (f4) {
      std::memcpy(&a.data[i], p + 4 * i, 4);
    } else if (i4) {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      a.data[i] = float(v);
    } else {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      a.data[i] = float(v);
    }
  }
  return a;
}

}  // namespace edgevl
