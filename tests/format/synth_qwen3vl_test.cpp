// `synth --arch qwen3-vl-2b`: the config it writes reads back as the believed published shape
// (Qwen3-1.7B-like text, the 24-block tower with DeepStack after blocks 5, 11, 17), and a
// shortened tower keeps only the DeepStack taps it has.
#include <gtest/gtest.h>

#include "core/temp_dir.h"
#include "format/qwen_vision_config.h"
#include "models/llm_config.h"
#include "models/registry.h"
#include "synth/text_file.h"

namespace edgevl {
namespace {

LlmConfig read_back(const models::SynthArch& arch, const models::SynthOverrides& o) {
  TempDir tmp;
  synth::write_text_file(tmp.path() / "config.json", arch.files(o).config.dump(2));
  return models::load_llm_config(tmp.path());
}

TEST(SynthQwen3Vl, PublishedShapeReadsBack) {
  const auto archs = models::synth_archs();
  const models::SynthArch* arch = nullptr;
  for (const auto& a : archs)
    if (a.name == "qwen3-vl-2b") arch = &a;
  ASSERT_NE(arch, nullptr);
  EXPECT_TRUE(arch->vision);
  const LlmConfig c = read_back(*arch, {});
  EXPECT_EQ(c.family, "qwen3_vl");
  EXPECT_EQ(c.hidden, 2048);
  EXPECT_EQ(c.n_layers, 28);
  EXPECT_EQ(c.n_heads, 16);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.ffn, 6144);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.flags.get_int("mrope_section_h", 0), 20);
  EXPECT_EQ(c.flags.get_int("vision.image_token", -1), 151655);
  const QwenVisionShape vs = qwen_vision_shape(c);
  EXPECT_EQ(vs.depth, 24);
  EXPECT_EQ(vs.hidden, 1024);
  EXPECT_EQ(vs.out, 2048);
  EXPECT_EQ(vs.deepstack, (std::vector<int32_t>{5, 11, 17}));

  models::SynthOverrides o;
  o.layers = 2;
  o.vision_layers = 6;
  const QwenVisionShape short_tower = qwen_vision_shape(read_back(*arch, o));
  EXPECT_EQ(short_tower.depth, 6);
  EXPECT_EQ(short_tower.deepstack, (std::vector<int32_t>{5}));
}

}  // namespace
}  // namespace edgevl
