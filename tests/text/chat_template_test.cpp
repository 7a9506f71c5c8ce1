// Chat templates rendered byte for byte as the references do: InternVL's conversation.py
// (strings captured in tests/fixtures/golden/internvl_templates.json by
// tools/golden/make_internvl_goldens.py) and the tokenizer_config templates of the LLMs.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "models/internvl.h"
#include "models/registry.h"
#include "support/test_paths.h"
#include "text/chat_template.h"

namespace edgevl::text {
namespace {

using models::internvl_chat_template;

// The template a family picks for a checkpoint whose tokenizer_config says `hf`.
ChatTemplate chat_template_for(const std::string& family, const std::string& hf) {
  return models::family_named(family).chat_template(hf);
}

TEST(ChatTemplate, InternVLTemplatesMatchConversationPy) {
  const auto j = nlohmann::json::parse(
      read_text_file(test::fixtures_dir() / "golden" / "internvl_templates.json"));
  int checked = 0;
  for (const auto& [name, t] : j["templates"].items()) {
    ChatTemplate tmpl;
    ASSERT_TRUE(internvl_chat_template(name, &tmpl)) << name;
    for (const char* c : {"single_turn", "two_turn"}) {
      std::vector<ChatMessage> msgs;
      for (const auto& m : t[c]["messages"]) msgs.push_back({m[0], m[1]});
      EXPECT_EQ(tmpl.render(msgs, true), t[c]["prompt"].get<std::string>()) << name << " " << c;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6);
  ChatTemplate unknown;
  EXPECT_FALSE(internvl_chat_template("vicuna_v1.1", &unknown));
}

TEST(ChatTemplate, QwenChatMLDefaults) {
  const ChatTemplate q2 = chat_template_for(
      "qwen2", "{% ... '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>' %}");
  EXPECT_EQ(
      q2.render({{"user", "hi"}}, true),
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
      "<|im_start|>assistant\n");
  const ChatTemplate q25 =
      chat_template_for("qwen2", "<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud.");
  EXPECT_EQ(q25.render({{"system", "Be brief."}, {"user", "hi"}}, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n");
  EXPECT_EQ(q25.default_system,
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
}

TEST(ChatTemplate, InternLM2AndLlama2) {
  const ChatTemplate il = chat_template_for("internlm2", "");
  EXPECT_EQ(il.render({{"user", "hi"}}, true),
            "<s><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  const ChatTemplate l2 = chat_template_for("llama", "");
  EXPECT_EQ(
      l2.render({{"system", "S"}, {"user", " hi "}, {"assistant", "yo"}, {"user", "again"}}, true),
      // content.strip() applies to "<<SYS>>...<</SYS>>\n\n" + " hi ": only the outer ends.
      "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\n hi [/INST] yo </s><s>[INST] again [/INST]");
}

TEST(ChatTemplate, Qwen3IsChatMLWithoutDefaultSystem) {
  // Qwen3's template (thinking on, its default): no system turn unless given, and the
  // generation prompt is the bare assistant header.
  const ChatTemplate q3 = chat_template_for("qwen3", "");
  EXPECT_EQ(q3.render({{"user", "hi"}}, true),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(q3.render({{"system", "S"}, {"user", "hi"}}, true),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

}  // namespace
}  // namespace edgevl::text
