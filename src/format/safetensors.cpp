#include "format/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"

namespace edgevl {

namespace {

// Same cap as the reference implementation: a header larger than this is a corrupted length
// field, not a real checkpoint, and parsing it would only waste memory.
constexpr uint64_t kMaxHeader = 100ull << 20;

struct DtypeSize {
  std::string_view name;
  size_t size;
};
constexpr DtypeSize kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8},
};

std::string known_dtypes() {
  std::string s;
  for (const auto& d : kDtypes) {
    if (!s.empty()) s += ", ";
    s += d.name;
  }
  return s;
}

uint64_t read_le_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t safetensors_dtype_size(std::string_view dtype) {
  for (const auto& d : kDtypes)
    if (d.name == dtype) return d.size;
  return 0;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& p) : map_(p), name_(p.string()) {
  parse(map_.bytes());
}

SafetensorsFile::SafetensorsFile(std::span<const uint8_t> bytes, std::string name)
    : name_(std::move(name)) {
  parse(bytes);
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::parse(std::span<const uint8_t> bytes) {
  const std::string& f = name_;
  check(bytes.size() >= 8,
        "{}: file is {} bytes at offset 0; expected at least 8 (the little-endian u64 header "
        "length of a safetensors file)",
        f, bytes.size());
  const uint64_t n = read_le_u64(bytes.data());
  const uint64_t after = bytes.size() - 8;
  check(n <= after,
        "{}: header length {} (u64 at offset 0) runs past the end of the file: expected at most "
        "{} bytes after offset 8 (file is {} bytes; truncated or not a safetensors file?)",
        f, n, after, bytes.size());
  check(n <= kMaxHeader, "{}: header length {} (u64 at offset 0) exceeds the {} byte limit", f, n,
        kMaxHeader);
  check(n >= 2, "{}: header length {} at offset 0; expected a JSON object of at least 2 bytes", f,
        n);

  const char* hb = reinterpret_cast<const char*>(bytes.data() + 8);
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(hb, hb + n);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts from 1 inside the header; report the absolute file offset.
    const size_t at = 8 + (e.byte > 0 ? e.byte - 1 : 0);
    fail("{}: header is not valid JSON at offset {} (header spans offsets 8..{}): {}", f, at, 8 + n,
         e.what());
  } catch (const nlohmann::json::exception& e) {
    // e.g. a number too large for a double: valid syntax, no position reported.
    fail("{}: header at offset 8 (JSON, {} bytes) cannot be read: {}", f, n, e.what());
  }
  check(h.is_object(), "{}: header at offset 8 is a JSON {}; expected an object", f, h.type_name());

  const size_t data_start = 8 + size_t(n);
  const size_t data_size = bytes.size() - data_start;
  const uint8_t* data = bytes.data() + data_start;

  tensors_.reserve(h.size());
  for (const auto& [key, v] : h.items()) {
    if (key == "__metadata__") {
      check(v.is_object() || v.is_null(),
            "{}: header at offset 8: __metadata__ is a {}; expected an object of strings", f,
            v.type_name());
      if (v.is_null()) continue;
      for (const auto& [mk, mv] : v.items()) {
        check(mv.is_string(),
              "{}: header at offset 8: __metadata__['{}'] is a {}; expected a string", f, mk,
              mv.type_name());
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    check(v.is_object(), "{}: header at offset 8: tensor '{}' is a {}; expected an object", f, key,
          v.type_name());
    TensorView t;
    t.name = key;
    t.file = f;

    auto dt = v.find("dtype");
    check(dt != v.end() && dt->is_string(),
          "{}: header at offset 8: tensor '{}' has no string 'dtype'", f, key);
    t.dtype = dt->get<std::string>();
    const size_t esize = safetensors_dtype_size(t.dtype);
    check(esize != 0,
          "{}: header at offset 8: tensor '{}' has unknown dtype '{}'; expected one of {}", f, key,
          t.dtype, known_dtypes());

    auto sh = v.find("shape");
    check(sh != v.end() && sh->is_array(),
          "{}: header at offset 8: tensor '{}' has no 'shape' array", f, key);
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& d : *sh) {
      check(d.is_number_unsigned(),
            "{}: header at offset 8: tensor '{}' shape entry {} is not a non-negative integer", f,
            key, d.dump());
      const uint64_t dim = d.get<uint64_t>();
      check(dim <= uint64_t(INT64_MAX),
            "{}: header at offset 8: tensor '{}' shape entry {} is too large", f, key, dim);
      t.shape.push_back(int64_t(dim));
      overflow |= __builtin_mul_overflow(numel, dim, &numel);
    }
    uint64_t span_needed = 0;
    overflow |= __builtin_mul_overflow(numel, uint64_t(esize), &span_needed);
    check(!overflow, "{}: header at offset 8: tensor '{}' shape {} overflows 64 bits", f, key,
          sh->dump());

    auto off = v.find("data_offsets");
    check(off != v.end() && off->is_array() && off->size() == 2 && (*off)[0].is_number_unsigned() &&
              (*off)[1].is_number_unsigned(),
          "{}: header at offset 8: tensor '{}' needs 'data_offsets' as [begin, end] of "
          "non-negative integers",
          f, key);
    const uint64_t b = (*off)[0].get<uint64_t>();
    const uint64_t e = (*off)[1].get<uint64_t>();
    check(b <= e, "{}: header at offset 8: tensor '{}' data_offsets [{}, {}] has begin > end", f,
          key, b, e);
    check(e - b == span_needed,
          "{}: header at offset 8: tensor '{}' shape {} x {} ({} bytes/element) needs {} bytes, "
          "but data_offsets [{}, {}] span {} bytes",
          f, key, sh->dump(), t.dtype, esize, span_needed, b, e, e - b);
    check(e <= data_size,
          "{}: tensor '{}' data_offsets [{}, {}] end at file offset {}, past the end of the file "
          "({} bytes; data area starts at offset {} and holds {} bytes): truncated file or bad "
          "offsets",
          f, key, b, e, uint64_t(data_start) + e, bytes.size(), data_start, data_size);
    t.data = data + b;
    t.nbytes = size_t(e - b);
    t.file_offset = data_start + size_t(b);
    tensors_.push_back(std::move(t));
  }

  std::sort(tensors_.begin(), tensors_.end(), [](const TensorView& a, const TensorView& b) {
    return a.file_offset != b.file_offset ? a.file_offset < b.file_offset : a.nbytes < b.nbytes;
  });
  // Two non-empty tensors sharing bytes would alias each other's weights: refuse.
  const TensorView* prev = nullptr;
  for (const auto& t : tensors_) {
    if (t.nbytes == 0) continue;
    if (prev && t.file_offset < prev->file_offset + prev->nbytes)
      fail(
          "{}: tensors '{}' (file offsets {}..{}) and '{}' (file offsets {}..{}) overlap; "
          "expected disjoint data_offsets",
          f, prev->name, prev->file_offset, prev->file_offset + prev->nbytes, t.name, t.file_offset,
          t.file_offset + t.nbytes);
    prev = &t;
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

void tensor_to_f32(const TensorView& t, float* out) {
  const size_t n = size_t(t.numel());
  const uint8_t* p = t.data;
  if (t.dtype == "F32") {
    check(t.nbytes == n * 4, "{}: tensor {} has {} bytes; expected {}", t.file, t.name, t.nbytes,
          n * 4);
    std::memcpy(out, p, n * 4);
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    check(t.nbytes == n * 2, "{}: tensor {} has {} bytes; expected {}", t.file, t.name, t.nbytes,
          n * 2);
    const bool bf = t.dtype == "BF16";
    // Chunked through an aligned buffer: the mapped data may sit at any byte offset.
    constexpr size_t kChunk = 4096;
    uint16_t buf[kChunk];
    for (size_t i = 0; i < n; i += kChunk) {
      const size_t m = std::min(kChunk, n - i);
      std::memcpy(buf, p + i * 2, m * 2);
      if (bf)
        for (size_t j = 0; j < m; ++j) out[i + j] = bf16_to_f32(buf[j]);
      else
        for (size_t j = 0; j < m; ++j) out[i + j] = f16_to_f32(buf[j]);
    }
  } else {
    fail("{}: tensor {} has dtype {}; edgevl reads F32, F16, BF16", t.file, t.name, t.dtype);
  }
}

// ---------------------------------------------------------------------------------------------

SafetensorsWriter::SafetensorsWriter(const std::filesystem::path& p, std::vector<Entry> entries,
                                     const std::map<std::string, std::string>& metadata)
    : path_(p), tmp_(p.string() + ".partial"), entries_(std::move(entries)) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const auto& e : entries_) {
    const size_t es = safetensors_dtype_size(e.dtype);
    check(es != 0, "{}: cannot write tensor '{}' with unknown dtype '{}'; expected one of {}",
          p.string(), e.name, e.dtype, known_dtypes());
    check(!h.contains(e.name) && e.name != "__metadata__", "{}: tensor '{}' listed twice",
          p.string(), e.name);
    uint64_t n = es;
    for (int64_t d : e.shape) {
      check(d >= 0, "{}: tensor '{}' has negative dimension {}", p.string(), e.name, d);
      n *= uint64_t(d);
    }
    h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {off, off + n}}};
    sizes_.push_back(size_t(n));
    off += n;
  }
  std::string js = h.dump();
  // Pad with spaces so the data area starts 8-byte aligned, as the reference writer does.
  while ((js.size() + 8) % 8) js.push_back(' ');

  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) fail("{}: cannot open for writing: {}", tmp_.string(), std::strerror(errno));
  std::setvbuf(f_, nullptr, _IOFBF, 1 << 22);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(js.size()) >> (8 * i));
  if (std::fwrite(len, 1, 8, f_) != 8 || std::fwrite(js.data(), 1, js.size(), f_) != js.size())
    fail("{}: write error: {}", tmp_.string(), std::strerror(errno));
  cur_ = 0;
  cur_left_ = sizes_.empty() ? 0 : sizes_[0];
  advance();
}

SafetensorsWriter::~SafetensorsWriter() {
  if (f_) std::fclose(f_);
  if (!finished_) {
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
  }
}

void SafetensorsWriter::advance() {
  // Skip past finished (and zero-byte) tensors.
  while (cur_ < entries_.size() && cur_left_ == 0) {
    ++cur_;
    cur_left_ = cur_ < entries_.size() ? sizes_[cur_] : 0;
  }
}

size_t SafetensorsWriter::remaining_in_tensor() const {
  return cur_left_;
}

const SafetensorsWriter::Entry& SafetensorsWriter::current() const {
  check(cur_ < entries_.size(), "{}: all tensors already written", path_.string());
  return entries_[cur_];
}

void SafetensorsWriter::write(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    check(cur_ < entries_.size(), "{}: {} bytes written past the last tensor", path_.string(), n);
    const size_t m = std::min(n, cur_left_);
    if (std::fwrite(p, 1, m, f_) != m)
      fail("{}: write error: {}", tmp_.string(), std::strerror(errno));
    p += m;
    n -= m;
    cur_left_ -= m;
    advance();
  }
}

void SafetensorsWriter::finish() {
  check(cur_ == entries_.size(), "{}: tensor '{}' still expects {} bytes", path_.string(),
        cur_ < entries_.size() ? entries_[cur_].name : "", cur_left_);
  const bool ok = std::fflush(f_) == 0;
  const int err = errno;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok || !closed) fail("{}: write error: {}", tmp_.string(), std::strerror(err));
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) fail("{}: cannot rename to {}: {}", tmp_.string(), path_.string(), ec.message());
  finished_ = true;
}

void write_safetensors(const std::filesystem::path& p, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsWriter::Entry> entries;
  entries.reserve(tensors.size());
  for (const auto& t : tensors) entries.push_back({t.name, t.dtype, t.shape});
  SafetensorsWriter w(p, std::move(entries), metadata);
  for (const auto& t : tensors) {
    uint64_t need = safetensors_dtype_size(t.dtype);
    for (int64_t d : t.shape) need *= uint64_t(d);
    check(t.bytes.size() == need, "{}: tensor '{}' has {} bytes; its dtype and shape need {}",
          p.string(), t.name, t.bytes.size(), need);
    w.write(t.bytes.data(), t.bytes.size());
  }
  w.finish();
}

}  // namespace edgevl
