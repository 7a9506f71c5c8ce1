#pragma once
// Chat templates of the supported families, reproduced byte for byte from the reference
// tokenizer_config / InternVL conversation templates. A template is data (this struct),
// stored in the .evb, so the runtime needs no Jinja engine.
#include <string>
#include <vector>

#include "core/byte_io.h"

namespace edgevl::text {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

struct ChatTemplate {
  std::string name;            // "chatml", "qwen2.5", "internlm2-chat", "llama2", ...
  std::string prefix;          // text before everything (e.g. "<s>" for InternLM2)
  std::string default_system;  // used when the conversation has no system message ("" = none)
  // Each turn is rendered as role_open + content + turn_close, with role_open made of
  // turn_open_prefix + role + turn_open_suffix (ChatML: "<|im_start|>" + role + "\n").
  std::string turn_open_prefix;
  std::string turn_open_suffix;
  std::string turn_close;      // e.g. "<|im_end|>\n"
  bool llama2_style = false;   // [INST] ... [/INST] with <<SYS>> folded into the first turn
  bool tokenizer_bos = false;  // prepend BOS when the tokenizer adds one (InternVL's chat())
  std::vector<std::string> stop_strings;  // e.g. "<|im_end|>"
  // Opens the assistant's reply after the generation prompt's role line: Qwen3.5 starts it
  // thinking ("<think>\n"). Empty for most templates.
  std::string reply_prefix;
  // The same with thinking off (the template's enable_thinking=false): Qwen3.5's closed empty
  // think block "<think>\n\n</think>\n\n". Empty: thinking cannot be turned off (reply_prefix
  // opens every reply).
  std::string reply_prefix_no_think;

  // Renders the conversation and, when add_generation_prompt, opens the assistant turn (with
  // thinking off: reply_prefix_no_think where the template has one).
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     bool thinking = true) const;
};

// The two shapes of template the families use (each family picks its own: src/models/).
// ChatML: "<|im_start|>" + role + "\n" + content + "<|im_end|>\n" per turn.
ChatTemplate chatml_template(const std::string& name, const std::string& default_system);
// Llama-2 chat: "<s>[INST] <<SYS>>...<</SYS>> user [/INST] assistant </s>".
ChatTemplate llama2_template();

void write_chat_template(ByteWriter& w, const ChatTemplate& t);
ChatTemplate read_chat_template(ByteReader& r);

}  // namespace edgevl::text
