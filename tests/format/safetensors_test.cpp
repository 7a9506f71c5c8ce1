// Safetensors reading/writing: round trips, float conversions, and one test per kind of
// damaged header, each checking the message names the file, the offset and the expectation.
#include "format/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/dtype.h"
#include "core/error.h"
#include "support/test_paths.h"
#include "support/test_util.h"

namespace edgevl {
namespace {

namespace fs = std::filesystem;

template <class T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A raw safetensors file: `header` is written as is after its length (or `len` if given).
fs::path raw_file(const fs::path& dir, const std::string& header, size_t data_bytes,
                  int64_t len = -1) {
  const fs::path p = dir / "raw.safetensors";
  std::ofstream f(p, std::ios::binary);
  const uint64_t n = len >= 0 ? uint64_t(len) : header.size();
  for (int i = 0; i < 8; ++i) f.put(char(n >> (8 * i)));
  f << header;
  for (size_t i = 0; i < data_bytes; ++i) f.put(char(i));
  return p;
}

using test::error_of;

TEST(Safetensors, RoundTripKeepsNamesShapesValuesAndMetadata) {
  test::TempDir tmp;
  const fs::path p = tmp.path() / "m.safetensors";
  const std::vector<float> a = {1.f, -2.f, 3.5f, 0.f, 1e-3f, -7.25f};
  const std::vector<int8_t> q = {-128, 0, 127};
  write_safetensors(p,
                    {{"a", "F32", {2, 3}, as_bytes(a)},
                     {"q", "I8", {3}, as_bytes(q)},
                     {"empty", "F32", {0, 4}, {}}},
                    {{"format", "pt"}});
  SafetensorsFile f(p);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const TensorView* ta = f.find("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->dtype, "F32");
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ta->numel(), 6);
  EXPECT_EQ(ta->nbytes, 24u);
  EXPECT_EQ(ta->file, p.string());
  std::vector<float> out(6);
  tensor_to_f32(*ta, out.data());
  EXPECT_EQ(out, a);
  const TensorView* tq = f.find("q");
  ASSERT_NE(tq, nullptr);
  EXPECT_EQ(std::memcmp(tq->data, q.data(), 3), 0);
  EXPECT_EQ(f.find("empty")->numel(), 0);
  EXPECT_EQ(f.find("missing"), nullptr);
  // The data area starts 8-byte aligned, as the reference writer makes it.
  EXPECT_EQ(f.tensors().front().file_offset % 8, 0u);
}

TEST(Safetensors, ParsesBytesInMemory) {
  test::TempDir tmp;
  const fs::path p = tmp.path() / "m.safetensors";
  write_safetensors(p, {{"x", "F32", {1}, as_bytes(std::vector<float>{4.f})}});
  std::ifstream in(p, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  SafetensorsFile f(bytes, "memory");
  float v = 0;
  tensor_to_f32(*f.find("x"), &v);
  EXPECT_EQ(v, 4.f);
}

TEST(Safetensors, ConvertsF16AndBF16ToF32) {
  test::TempDir tmp;
  const fs::path p = tmp.path() / "m.safetensors";
  // Half: 1, -2.5, 65504 (largest finite), smallest subnormal, -0, inf.
  const std::vector<uint16_t> h = {0x3c00, 0xc100, 0x7bff, 0x0001, 0x8000, 0x7c00};
  // BFloat16: 1, -2.5, 3.140625, 1e-38-ish subnormal top bits.
  const std::vector<uint16_t> b = {0x3f80, 0xc020, 0x4049, 0x006d};
  write_safetensors(p, {{"h", "F16", {6}, as_bytes(h)}, {"b", "BF16", {2, 2}, as_bytes(b)}});
  SafetensorsFile f(p);
  std::vector<float> oh(6), ob(4);
  tensor_to_f32(*f.find("h"), oh.data());
  tensor_to_f32(*f.find("b"), ob.data());
  EXPECT_EQ(oh[0], 1.f);
  EXPECT_EQ(oh[1], -2.5f);
  EXPECT_EQ(oh[2], 65504.f);
  EXPECT_EQ(oh[3], std::ldexp(1.f, -24));
  EXPECT_TRUE(oh[4] == 0.f && std::signbit(oh[4]));
  EXPECT_TRUE(std::isinf(oh[5]));
  EXPECT_EQ(ob[0], 1.f);
  EXPECT_EQ(ob[1], -2.5f);
  EXPECT_EQ(ob[2], 3.140625f);
  EXPECT_EQ(ob[3], f32_from_bits(0x006d0000u));
}

TEST(Safetensors, ConvertsLargeUnalignedBF16) {
  // More than one conversion chunk, at an odd offset in the file.
  test::TempDir tmp;
  const fs::path p = tmp.path() / "m.safetensors";
  std::vector<uint16_t> b(10000);
  for (size_t i = 0; i < b.size(); ++i) b[i] = f32_to_bf16(float(i) * 0.5f);
  write_safetensors(p, {{"pad", "I8", {1}, {7}}, {"b", "BF16", {10000}, as_bytes(b)}});
  SafetensorsFile f(p);
  EXPECT_EQ(f.find("b")->file_offset % 2, 1u);
  std::vector<float> out(10000);
  tensor_to_f32(*f.find("b"), out.data());
  for (size_t i = 0; i < out.size(); i += 997) EXPECT_EQ(out[i], bf16_to_f32(b[i]));
}

TEST(Safetensors, RefusesToConvertIntegerTensors) {
  test::TempDir tmp;
  const fs::path p = tmp.path() / "m.safetensors";
  write_safetensors(p, {{"q", "I8", {2}, {1, 2}}});
  SafetensorsFile f(p);
  float out[2];
  const std::string m = error_of([&] { tensor_to_f32(*f.find("q"), out); });
  EXPECT_NE(m.find(p.string() + ": tensor q has dtype I8; edgevl reads F32, F16, BF16"),
            std::string::npos)
      << m;
}

TEST(SafetensorsErrors, EmptyFile) {
  test::TempDir tmp;
  const fs::path p = tmp.path() / "empty.safetensors";
  std::ofstream(p).close();
  const std::string m = error_of([&] { SafetensorsFile f(p); });
  EXPECT_NE(m.find(p.string()), std::string::npos) << m;
  EXPECT_NE(m.find("offset 0"), std::string::npos) << m;
  EXPECT_NE(m.find("expected at least 8"), std::string::npos) << m;
}

TEST(SafetensorsErrors, HeaderLengthLargerThanFile) {
  test::TempDir tmp;
  const fs::path p = raw_file(tmp.path(), "{}", 0, 1000);
  const std::string m = error_of([&] { SafetensorsFile f(p); });
  EXPECT_NE(m.find(p.string()), std::string::npos) << m;
  EXPECT_NE(m.find("header length 1000"), std::string::npos) << m;
  EXPECT_NE(m.find("offset 0"), std::string::npos) << m;
  EXPECT_NE(m.find("expected at most 2 bytes"), std::string::npos) << m;
}

TEST(SafetensorsErrors, TruncatedData) {
  test::TempDir tmp;
  const std::string h = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  const fs::path p = raw_file(tmp.path(), h, 10);
  const std::string m = error_of([&] { SafetensorsFile f(p); });
  EXPECT_NE(m.find(p.string()), std::string::npos) << m;
  EXPECT_NE(m.find("'w'"), std::string::npos) << m;
  // end of data at file offset 8 + header + 16; file is 8 + header + 10 bytes.
  EXPECT_NE(m.find("file offset " + std::to_string(8 + h.size() + 16)), std::string::npos) << m;
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;
}

TEST(SafetensorsErrors, InvalidJson) {
  test::TempDir tmp;
  const fs::path p = raw_file(tmp.path(), R"({"a": x})", 0);
  const std::string m = error_of([&] { SafetensorsFile f(p); });
  EXPECT_NE(m.find(p.string()), std::string::npos) << m;
  // The 'x' is byte 6 of the header, i.e. file offset 14.
  EXPECT_NE(m.find("not valid JSON at offset 14"), std::string::npos) << m;
}

TEST(SafetensorsErrors, HeaderNotAnObject) {
  test::TempDir tmp;
  const fs::path p = raw_file(tmp.path(), "[1, 2]", 0);
  const std::string m = error_of([&] { SafetensorsFile f(p); });
  EXPECT_NE(m.find("offset 8 is a JSON array; expected an object"), std::string::npos) << m;
}

TEST(SafetensorsErrors, OffsetsOutOfRange) {
  test::TempDir tmp;
  {
    const fs::path p =
        raw_file(tmp.path(), R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[1000,1004]}})", 8);
    const std::string m = error_of([&] { SafetensorsFile f(p); });
    EXPECT_NE(m.find("data_offsets [1000, 1004]"), std::string::npos) << m;
    EXPECT_NE(m.find("past the end of the file"), std::string::npos) << m;
  }
  {
    const fs::path p =
        raw_file(tmp.path(), R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 8);
    const std::string m = error_of([&] { SafetensorsFile f(p); });
    EXPECT_NE(m.find("begin > end"), std::string::npos) << m;
  }
  {
    const fs::path p =
        raw_file(tmp.path(), R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 8);
    const std::string m = error_of([&] { SafetensorsFile f(p); });
    EXPECT_NE(m.find("data_offsets"), std::string::npos) << m;
  }
}

TEST(SafetensorsErrors, OverlappingTensors) {
  test::TempDir tmp;
  const fs::path p = raw_file(tmp.path(),
                              R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              12);
  const std::string m = error_of([&] { SafetensorsFile f(p); });
  EXPECT_NE(m.find(p.string()), std::string::npos) << m;
  EXPECT_NE(m.find("'a'"), std::string::npos) << m;
  EXPECT_NE(m.find("'b'"), std::string::npos) << m;
  EXPECT_NE(m.find("overlap"), std::string::npos) << m;
  EXPECT_NE(m.find("expected disjoint"), std::string::npos) << m;
}

TEST(SafetensorsErrors, ShapeTimesDtypeDiffersFromSpan) {
  test::TempDir tmp;
  const fs::path p =
      raw_file(tmp.path(), R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
  const std::string m = error_of([&] { SafetensorsFile f(p); });
  EXPECT_NE(m.find(p.string()), std::string::npos) << m;
  EXPECT_NE(m.find("needs 12 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("span 8 bytes"), std::string::npos) << m;
}

TEST(SafetensorsErrors, UnknownDtype) {
  test::TempDir tmp;
  const fs::path p =
      raw_file(tmp.path(), R"({"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})", 1);
  const std::string m = error_of([&] { SafetensorsFile f(p); });
  EXPECT_NE(m.find(p.string()), std::string::npos) << m;
  EXPECT_NE(m.find("unknown dtype 'Q9'"), std::string::npos) << m;
  EXPECT_NE(m.find("expected one of"), std::string::npos) << m;
  EXPECT_NE(m.find("BF16"), std::string::npos) << m;
}

TEST(SafetensorsErrors, BadShapeAndMetadata) {
  test::TempDir tmp;
  {
    const fs::path p =
        raw_file(tmp.path(), R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4);
    const std::string m = error_of([&] { SafetensorsFile f(p); });
    EXPECT_NE(m.find("not a non-negative integer"), std::string::npos) << m;
  }
  {
    const fs::path p = raw_file(
        tmp.path(), R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
        4);
    const std::string m = error_of([&] { SafetensorsFile f(p); });
    EXPECT_NE(m.find("overflows"), std::string::npos) << m;
  }
  {
    const fs::path p = raw_file(tmp.path(), R"({"__metadata__":{"format":1}})", 0);
    const std::string m = error_of([&] { SafetensorsFile f(p); });
    EXPECT_NE(m.find("__metadata__['format']"), std::string::npos) << m;
  }
}

TEST(SafetensorsWriter, RejectsWrongByteCounts) {
  test::TempDir tmp;
  const fs::path p = tmp.path() / "w.safetensors";
  const std::string m = error_of([&] { write_safetensors(p, {{"w", "F32", {2}, {1, 2, 3}}}); });
  EXPECT_NE(m.find("has 3 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("need 8"), std::string::npos) << m;
  // The aborted write leaves neither the file nor its partial twin behind.
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(fs::exists(p.string() + ".partial"));
}

}  // namespace
}  // namespace edgevl
