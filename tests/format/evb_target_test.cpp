// The target rule of a context binary (evb.h EvbTarget): one made for the other ISA family, or
// packed for CPU features this CPU lacks, is refused at load naming both sides; binaries
// packed for every level (what `edgevl compile` writes) load everywhere. The feature check is
// tested as a function of the CPU's feature list (so every host covers it), and end to end
// through the loader with a header patched to need a feature this CPU lacks (under qemu
// -cpu cortex-a53: dotprod, i8mm, bf16).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/temp_dir.h"
#include "format/evb.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

uint64_t bit_of(std::string_view name) {
  const auto names = cpu::cpu_feature_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (name == names[i].name) return uint64_t(1) << i;
  ADD_FAILURE() << "no feature bit named " << name;
  return 0;
}

TEST(EvbTarget, MissingFeaturesAreNamed) {
  const EvbTarget portable{TargetIsa::Any, 0};
  EXPECT_EQ(evb_missing_features(portable, ""), "");
  const EvbTarget i8mm{TargetIsa::AArch64, bit_of("i8mm") | bit_of("dotprod")};
  // Cortex-A53 (armv8.0): NEON only. Neoverse-N1: + dotprod, fp16. A max / Neoverse-V1 class
  // core: all of them.
  EXPECT_EQ(evb_missing_features(i8mm, "neon"), "dotprod i8mm");
  EXPECT_EQ(evb_missing_features(i8mm, "neon fp16 dotprod"), "i8mm");
  EXPECT_EQ(evb_missing_features(i8mm, "neon fp16 dotprod i8mm bf16"), "");
  // Whole names only: "avx512bf16" does not provide "bf16".
  EXPECT_EQ(evb_missing_features({TargetIsa::Any, bit_of("bf16")}, "avx512bf16 amx_bf16"), "bf16");
  // A bit this edgevl has no name for is missing everywhere.
  EXPECT_EQ(evb_missing_features({TargetIsa::Any, uint64_t(1) << 63}, "neon"), "feature-bit-63");
}

// Header fields (evb.h): magic at 0, format version at 8, target ISA at 12, features at 16.
std::vector<uint8_t> with_target(std::vector<uint8_t> bytes, TargetIsa isa, uint64_t features) {
  const auto v = uint32_t(isa);
  std::memcpy(bytes.data() + 12, &v, 4);
  std::memcpy(bytes.data() + 16, &features, 8);
  return bytes;
}

class EvbTargetLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto src = test::compiled_path(test::fixtures_dir() / "golden" / "llama", "f32");
    std::ifstream f(src, std::ios::binary);
    good_.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    ASSERT_GT(good_.size(), 128u);
  }
  std::string load_error(const std::vector<uint8_t>& bytes) {
    const auto path = dir_.path() / "t.evb";
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    try {
      EvbFile f(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";  // loaded
  }
  std::vector<uint8_t> good_;
  TempDir dir_;
#if defined(__aarch64__)
  static constexpr TargetIsa kHere = TargetIsa::AArch64, kOther = TargetIsa::X86_64;
  // In the order of their bits (cpu_feature_names), as the error lists them.
  static constexpr const char* kFamily[] = {"neon", "dotprod", "i8mm", "bf16", "fp16"};
#else
  static constexpr TargetIsa kHere = TargetIsa::X86_64, kOther = TargetIsa::AArch64;
  static constexpr const char* kFamily[] = {
      "avx2",     "fma",        "f16c",       "bmi2",     "avx512f",  "avx512bw", "avx512vl",
      "avx512dq", "avx512vnni", "avx512bf16", "amx_tile", "amx_int8", "amx_bf16", "avxvnni"};
#endif
};

TEST_F(EvbTargetLoad, PortableAndOwnFamilyLoad) {
  EXPECT_EQ(load_error(good_), "");
  EXPECT_EQ(load_error(with_target(good_, kHere, 0)), "");
}

TEST_F(EvbTargetLoad, OtherFamilyIsRefusedNamingBoth) {
  const std::string msg = load_error(with_target(good_, kOther, 0));
  EXPECT_NE(msg.find(std::string("compiled for target ") + target_isa_name(kOther)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(std::string("this machine is ") + target_isa_name(kHere)), std::string::npos)
      << msg;
}

// Packed for every feature of this family: refused naming what the binary needs and what this
// CPU lacks, unless the CPU has them all (then it loads).
TEST_F(EvbTargetLoad, FeaturesThisCpuLacksAreRefusedNamingBoth) {
  uint64_t all = 0;
  std::string lacking;
  std::string have = " ";
  have.append(cpu::cpu_features_string()).push_back(' ');
  for (const char* f : kFamily) {
    all |= bit_of(f);
    std::string word = " ";  // (append: g++ 12 warns falsely on " " + s + " ")
    word.append(f).push_back(' ');
    if (have.find(word) != std::string::npos) continue;
    if (!lacking.empty()) lacking.push_back(' ');
    lacking.append(f);
  }
  const std::string msg = load_error(with_target(good_, kHere, all));
  if (lacking.empty()) {
    EXPECT_EQ(msg, "") << "this CPU has every feature of its family";
    return;
  }
  std::string lacks = "lacks ";
  lacks.append(lacking).push_back(' ');
  EXPECT_NE(msg.find(lacks), std::string::npos) << msg;
  EXPECT_NE(msg.find(evb_missing_features({kHere, all}, "")), std::string::npos) << msg;
  EXPECT_NE(msg.find("it has: " + cpu::cpu_features_string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("recompile"), std::string::npos) << msg;
  std::printf("refused as expected: %s\n", msg.c_str());
}

}  // namespace
}  // namespace edgevl
