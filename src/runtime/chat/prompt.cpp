#include "runtime/chat/prompt.h"

namespace edgevl {

std::vector<int32_t> encode_chat(const Model& m, const std::vector<text::ChatMessage>& messages,
                                 bool add_generation_prompt) {
  return encode_rendered(m, m.chat_template().render(messages, add_generation_prompt));
}

std::vector<int32_t> encode_rendered(const Model& m, std::string s) {
  const text::Tokenizer& t = m.tokenizer();
  std::vector<int32_t> ids;
  if (m.chat_template().tokenizer_bos && t.add_bos() && t.bos_id() >= 0) ids.push_back(t.bos_id());
  // A template that starts with the BOS string (InternLM2's "{{ bos_token }}") means the BOS
  // id, whatever the tokenizer would make of the characters.
  if (t.bos_id() >= 0) {
    const std::string bos = t.piece(t.bos_id());
    if (!bos.empty() && s.compare(0, bos.size(), bos) == 0) {
      ids.push_back(t.bos_id());
      s.erase(0, bos.size());
    }
  }
  for (int32_t id : t.encode(s, /*parse_special=*/true)) ids.push_back(id);
  return ids;
}

std::vector<int32_t> encode_raw(const Model& m, const std::string& text, bool add_bos) {
  const text::Tokenizer& t = m.tokenizer();
  std::vector<int32_t> ids;
  if (add_bos && t.add_bos() && t.bos_id() >= 0) ids.push_back(t.bos_id());
  for (int32_t id : t.encode(text, /*parse_special=*/true)) ids.push_back(id);
  return ids;
}

}  // namespace edgevl
