// Checkpoint directories: single file, sharded via index, several files without index, and
// the errors a user meets (missing tensors listed all at once, duplicates, broken index).
#include "format/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "support/test_paths.h"
#include "support/test_util.h"

namespace edgevl {
namespace {

namespace fs = std::filesystem;

TensorToWrite f32(const std::string& name, std::vector<float> v) {
  TensorToWrite t{name, "F32", {int64_t(v.size())}, {}};
  t.bytes.resize(v.size() * 4);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream(p) << s;
}

using test::error_of;

float first_value(const TensorView& t) {
  float v;
  std::memcpy(&v, t.data, 4);
  return v;
}

TEST(Checkpoint, SingleFile) {
  test::TempDir tmp;
  write_safetensors(tmp.path() / "model.safetensors", {f32("a", {1}), f32("b", {2, 3})});
  Checkpoint c(tmp.path());
  EXPECT_EQ(c.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(first_value(c.get("b")), 2.f);
  EXPECT_EQ(c.find("zz"), nullptr);
  EXPECT_EQ(c.dir(), tmp.path());
}

TEST(Checkpoint, ShardedViaIndex) {
  test::TempDir tmp;
  write_safetensors(tmp.path() / "model-00001-of-00002.safetensors",
                    {f32("x.0", {1}), f32("x.1", {2})});
  write_safetensors(tmp.path() / "model-00002-of-00002.safetensors",
                    {f32("y.0", {3}), f32("unlisted", {9})});
  write_text(tmp.path() / "model.safetensors.index.json", R"({
    "metadata": {"total_size": 12},
    "weight_map": {"x.0": "model-00001-of-00002.safetensors",
                   "x.1": "model-00001-of-00002.safetensors",
                   "y.0": "model-00002-of-00002.safetensors"}})");
  Checkpoint c(tmp.path());
  EXPECT_EQ(c.names(), (std::vector<std::string>{"x.0", "x.1", "y.0"}));
  EXPECT_EQ(c.files().size(), 2u);  // each shard opened once
  EXPECT_EQ(first_value(c.get("x.1")), 2.f);
  EXPECT_EQ(first_value(c.get("y.0")), 3.f);
  EXPECT_NE(c.get("y.0").file.find("model-00002-of-00002"), std::string::npos);
  // The index is the source of truth: tensors it does not list are not part of the model.
  EXPECT_EQ(c.find("unlisted"), nullptr);
}

TEST(Checkpoint, IndexedTensorMissingFromShard) {
  test::TempDir tmp;
  write_safetensors(tmp.path() / "s1.safetensors", {f32("a", {1})});
  write_text(tmp.path() / "model.safetensors.index.json",
             R"({"weight_map": {"a": "s1.safetensors", "ghost": "s1.safetensors"}})");
  const std::string m = error_of([&] { Checkpoint c(tmp.path()); });
  EXPECT_NE(m.find("'ghost'"), std::string::npos) << m;
  EXPECT_NE(m.find("model.safetensors.index.json"), std::string::npos) << m;
  EXPECT_NE(m.find("s1.safetensors"), std::string::npos) << m;
}

TEST(Checkpoint, IndexErrors) {
  test::TempDir tmp;
  write_text(tmp.path() / "model.safetensors.index.json",
             R"({"weight_map": {"a": "../escape.safetensors"}})");
  std::string m = error_of([&] { Checkpoint c(tmp.path()); });
  EXPECT_NE(m.find("expected a file name inside"), std::string::npos) << m;
  write_text(tmp.path() / "model.safetensors.index.json",
             R"({"weight_map": {"a": "nope.safetensors"}})");
  m = error_of([&] { Checkpoint c(tmp.path()); });
  EXPECT_NE(m.find("shard 'nope.safetensors'"), std::string::npos) << m;
  EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
  write_text(tmp.path() / "model.safetensors.index.json", R"({"weight_map": )");
  m = error_of([&] { Checkpoint c(tmp.path()); });
  EXPECT_NE(m.find("model.safetensors.index.json: invalid JSON at byte offset"), std::string::npos)
      << m;
}

TEST(Checkpoint, SeveralFilesWithoutIndex) {
  test::TempDir tmp;
  write_safetensors(tmp.path() / "part-a.safetensors", {f32("a", {1})});
  write_safetensors(tmp.path() / "part-b.safetensors", {f32("b", {2})});
  Checkpoint c(tmp.path());
  EXPECT_EQ(c.names(), (std::vector<std::string>{"a", "b"}));
  write_safetensors(tmp.path() / "part-c.safetensors", {f32("a", {5})});
  const std::string m = error_of([&] { Checkpoint c2(tmp.path()); });
  EXPECT_NE(m.find("tensor 'a' appears in both"), std::string::npos) << m;
  EXPECT_NE(m.find("part-a.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("part-c.safetensors"), std::string::npos) << m;
}

TEST(Checkpoint, MissingTensorsAreListedTogether) {
  test::TempDir tmp;
  write_safetensors(tmp.path() / "model.safetensors", {f32("a", {1})});
  Checkpoint c(tmp.path());
  c.require({"a"});
  const std::string m = error_of([&] { c.require({"a", "b.weight", "c.weight"}); });
  EXPECT_NE(m.find("checkpoint " + tmp.path().string()), std::string::npos) << m;
  EXPECT_NE(m.find("2 of 3 required tensors missing: b.weight, c.weight"), std::string::npos) << m;
  const std::string g = error_of([&] { c.get("lm_head.weight"); });
  EXPECT_EQ(g, "checkpoint " + tmp.path().string() + ": tensor 'lm_head.weight' missing");
}

TEST(Checkpoint, EmptyDirectory) {
  test::TempDir tmp;
  const std::string m = error_of([&] { Checkpoint c(tmp.path()); });
  EXPECT_NE(m.find("no model.safetensors"), std::string::npos) << m;
  const std::string n = error_of([&] { Checkpoint c(tmp.path() / "absent"); });
  EXPECT_NE(n.find("not a directory"), std::string::npos) << n;
}

}  // namespace
}  // namespace edgevl
