// The LLM config section: the shared fields and the family flags (a list of named int / float
// values, format 8) survive a write and a read; a damaged flag list is refused with an
// edgevl::Error naming it.
#include "format/model_config.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace edgevl {
namespace {

LlmConfig sample() {
  LlmConfig c;
  c.family = "llama";
  c.vocab_size = 32000;
  c.hidden = 2048;
  c.n_layers = 22;
  c.n_heads = 32;
  c.n_kv_heads = 4;
  c.head_dim = 64;
  c.ffn = 5632;
  c.norm_eps = 1e-5f;
  c.max_position = 2048;
  c.tie_embeddings = true;
  c.bos_id = 1;
  c.eos_id = 2;
  c.extra_eos_ids = {7, 9};
  c.flags.set("attention_bias", 1);
  c.flags.set("mlp_bias", 0);
  c.flags.set("logit_softcap", 30.f);
  return c;
}

std::vector<uint8_t> bytes_of(const LlmConfig& c) {
  ByteWriter w;
  write_config(w, c);
  return w.buffer();
}

LlmConfig read_back(const std::vector<uint8_t>& b) {
  ByteReader r(b, "test config");
  return read_llm_config(r);
}

TEST(ModelConfig, SharedFieldsAndFamilyFlagsRoundTrip) {
  const LlmConfig c = sample();
  const LlmConfig back = read_back(bytes_of(c));
  EXPECT_EQ(back.family, "llama");
  EXPECT_EQ(back.hidden, 2048);
  EXPECT_EQ(back.n_kv_heads, 4);
  EXPECT_FLOAT_EQ(back.norm_eps, 1e-5f);
  EXPECT_TRUE(back.tie_embeddings);
  EXPECT_EQ(back.extra_eos_ids, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(back.flags, c.flags);  // names, types, values and order
  EXPECT_EQ(back.flags.get_int("attention_bias", 0), 1);
  EXPECT_EQ(back.flags.get_int("mlp_bias", 1), 0);
  EXPECT_FLOAT_EQ(back.flags.get_float("logit_softcap", 0.f), 30.f);
  EXPECT_EQ(back.flags.get_int("absent", 5), 5);                // the family's default
  EXPECT_THROW(back.flags.get_int("logit_softcap", 0), Error);  // a float read as an int

  LlmConfig none = c;
  none.flags.clear();
  EXPECT_TRUE(read_back(bytes_of(none)).flags.items().empty());
}

// A config section holding only a family flags field (tag 21) with this payload.
std::vector<uint8_t> section_with_flags(const std::vector<uint8_t>& payload) {
  ByteWriter w;
  w.put<uint16_t>(21);
  w.put<uint32_t>(uint32_t(payload.size()));
  w.put_bytes(payload.data(), payload.size());
  w.put<uint16_t>(0);
  return w.buffer();
}

// One flag as written: type, name length, name, 4-byte value.
std::vector<uint8_t> flag(uint8_t type, const std::string& name, int32_t value = 1) {
  std::vector<uint8_t> b = {type, uint8_t(name.size())};
  b.insert(b.end(), name.begin(), name.end());
  const auto* v = reinterpret_cast<const uint8_t*>(&value);
  b.insert(b.end(), v, v + 4);
  return b;
}

TEST(ModelConfig, DamagedFamilyFlagsAreRefused) {
  auto refused = [](const std::vector<uint8_t>& payload, const char* says) {
    try {
      read_back(section_with_flags(payload));
      ADD_FAILURE() << "accepted: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("family flag"), std::string::npos) << e.what();
    }
  };
  const std::vector<uint8_t> ok = flag(1, "bias");
  EXPECT_EQ(read_back(section_with_flags(ok)).flags.get_int("bias", 0), 1);
  refused(flag(9, "bias"), "has type 9");  // a type this reader does not know
  refused(flag(1, ""), "empty or repeated");
  std::vector<uint8_t> twice = ok;
  twice.insert(twice.end(), ok.begin(), ok.end());
  refused(twice, "empty or repeated");
  std::vector<uint8_t> cut = ok;
  cut.pop_back();  // the value one byte short
  refused(cut, "truncated");
  cut = ok;
  cut[1] = 40;  // the name running past the list
  refused(cut, "truncated");
}

}  // namespace
}  // namespace edgevl
