#include "text/chat_template.h"

#include "core/error.h"

namespace edgevl::text {

namespace {

// Trims ASCII whitespace at both ends, like Python's str.strip() in the Llama-2 template.
std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string render_llama2(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  // "<s>[INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>" per exchange.
  std::string out, system;
  size_t i = 0;
  if (!messages.empty() && messages[0].role == "system")
    system = messages[i++].content;
  else
    system = t.default_system;
  bool first_user = true;
  for (; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      std::string content = m.content;
      if (first_user && !system.empty())
        content = std::string("<<SYS>>\n").append(system).append("\n<</SYS>>\n\n").append(content);
      first_user = false;
      out.append(t.prefix).append("[INST] ").append(strip(content)).append(" [/INST]");
    } else if (m.role == "assistant") {
      out.append(" ").append(strip(m.content)).append(" </s>");
    } else {
      fail("chat template llama2: unsupported role '{}' at message {}", m.role, i);
    }
  }
  return out;
}

}  // namespace

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt, bool thinking) const {
  if (llama2_style) return render_llama2(*this, messages);
  std::string out = prefix;
  auto turn = [&](const std::string& role, const std::string& content) {
    out.append(turn_open_prefix).append(role).append(turn_open_suffix).append(content);
  };
  if (!default_system.empty() && (messages.empty() || messages[0].role != "system")) {
    turn("system", default_system);
    out.append(turn_close);
  }
  for (const ChatMessage& m : messages) {
    turn(m.role, m.content);
    out.append(turn_close);
  }
  if (add_generation_prompt)
    turn("assistant",
         thinking || reply_prefix_no_think.empty() ? reply_prefix : reply_prefix_no_think);
  return out;
}

ChatTemplate chatml_template(const std::string& name, const std::string& default_system) {
  ChatTemplate t;
  t.name = name;
  t.default_system = default_system;
  t.turn_open_prefix = "<|im_start|>";
  t.turn_open_suffix =
      std::string(1, '\n');  // (a literal trips a g++ 12 -Wrestrict false positive)
  t.turn_close = "<|im_end|>\n";
  t.stop_strings = {"<|im_end|>"};
  return t;
}

ChatTemplate llama2_template() {
  ChatTemplate t;
  t.name = "llama2";
  t.prefix = "<s>";
  t.llama2_style = true;
  t.stop_strings = {"</s>"};
  return t;
}

void write_chat_template(ByteWriter& w, const ChatTemplate& t) {
  w.put_string(t.name);
  w.put_string(t.prefix);
  w.put_string(t.default_system);
  w.put_string(t.turn_open_prefix);
  w.put_string(t.turn_open_suffix);
  w.put_string(t.turn_close);
  w.put<uint8_t>(t.llama2_style ? 1 : 0);
  w.put<uint8_t>(t.tokenizer_bos ? 1 : 0);
  w.put<uint32_t>(uint32_t(t.stop_strings.size()));
  for (const auto& s : t.stop_strings) w.put_string(s);
  // Appended after the fields above, and only when set, so the files of templates without it
  // keep their bytes (and their readers).
  if (!t.reply_prefix.empty() || !t.reply_prefix_no_think.empty()) w.put_string(t.reply_prefix);
  if (!t.reply_prefix_no_think.empty()) w.put_string(t.reply_prefix_no_think);
}

ChatTemplate read_chat_template(ByteReader& r) {
  ChatTemplate t;
  t.name = r.get_string();
  t.prefix = r.get_string();
  t.default_system = r.get_string();
  t.turn_open_prefix = r.get_string();
  t.turn_open_suffix = r.get_string();
  t.turn_close = r.get_string();
  t.llama2_style = r.get<uint8_t>() != 0;
  t.tokenizer_bos = r.get<uint8_t>() != 0;
  const uint32_t n = r.get<uint32_t>();
  check(n <= r.remaining(), "{}: {} stop strings exceed the section", r.what(), n);
  for (uint32_t i = 0; i < n; ++i) t.stop_strings.push_back(r.get_string());
  if (r.remaining() > 0) t.reply_prefix = r.get_string();
  if (r.remaining() > 0) t.reply_prefix_no_think = r.get_string();
  return t;
}

}  // namespace edgevl::text
