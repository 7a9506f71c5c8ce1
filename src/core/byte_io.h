#pragma once
// Little-endian serialization helpers. ByteReader checks every read against the end of
// its buffer and throws with the owner's name and the offset: parsers of untrusted bytes
// go through it so no length or count is trusted before it is checked.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace edgevl {

class ByteWriter {
 public:
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }
  void put_bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  void put_string(std::string_view s) {
    put<uint32_t>(uint32_t(s.size()));
    put_bytes(s.data(), s.size());
  }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<uint64_t>(v.size());
    put_bytes(v.data(), v.size() * sizeof(T));
  }
  // An array the reader can use in place (ByteReader::get_array): zero padding to 8 bytes,
  // the count, then the elements, 8-byte aligned relative to the buffer start.
  template <class T>
  void put_array(std::span<const T> v) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 8);
    align(8);
    put<uint64_t>(v.size());
    put_bytes(v.data(), v.size() * sizeof(T));
  }
  void align(size_t a) {
    while (buf_.size() % a) buf_.push_back(0);
  }
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t>& buffer() { return buf_; }
  const std::vector<uint8_t>& buffer() const { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

class ByteReader {
 public:
  // `what` names the data in errors, e.g. "model.evb section 'tokenizer'"; `base` is the
  // offset of `data` inside its file so reported offsets are file offsets.
  ByteReader(std::span<const uint8_t> data, std::string what, size_t base = 0)
      : data_(data), what_(std::move(what)), base_(base) {}

  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T), "a value");
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string get_string() {
    const uint32_t n = get<uint32_t>();
    need(n, "string bytes");
    std::string s(reinterpret_cast<const char*>(data_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  template <class T>
  std::vector<T> get_vector() {
    static_assert(std::is_trivially_copyable_v<T>);
    const uint64_t n = get<uint64_t>();
    if (n > remaining() / sizeof(T)) too_short(n * sizeof(T), "array elements");
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), data_.data() + pos_, n * sizeof(T));  // no null pointer at n = 0
    pos_ += n * sizeof(T);
    return v;
  }
  // Reads what ByteWriter::put_array wrote, without copying: the span points into the
  // reader's bytes, which must then be 8-byte aligned in memory (checked).
  template <class T>
  std::span<const T> get_array(const char* expected) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 8);
    const size_t pad = (8 - pos_ % 8) % 8;
    need(pad, expected);
    pos_ += pad;
    const uint64_t n = get<uint64_t>();
    if (n > remaining() / sizeof(T)) too_short(n * sizeof(T), expected);
    const uint8_t* p = data_.data() + pos_;
    if (reinterpret_cast<uintptr_t>(p) % alignof(T) != 0)
      fail("{}: {} at offset {} is not aligned in memory", what_, expected, base_ + pos_);
    pos_ += n * sizeof(T);
    return {reinterpret_cast<const T*>(p), size_t(n)};
  }
  std::span<const uint8_t> get_bytes(size_t n) {
    need(n, "bytes");
    auto s = data_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  size_t pos() const { return pos_; }
  std::span<const uint8_t> data() const { return data_; }
  size_t base() const { return base_; }
  size_t remaining() const { return data_.size() - pos_; }
  bool done() const { return pos_ == data_.size(); }
  const std::string& what() const { return what_; }

  void need(size_t n, const char* expected) {
    if (n > remaining()) too_short(n, expected);
  }

 private:
  [[noreturn]] void too_short(uint64_t n, const char* expected) {
    fail("{}: truncated at offset {}: expected {} ({} bytes), only {} left", what_, base_ + pos_,
         expected, n, remaining());
  }
  std::span<const uint8_t> data_;
  std::string what_;
  size_t base_;
  size_t pos_ = 0;
};

}  // namespace edgevl
