#pragma once
// Unicode NFC normalization (what Qwen2's tokenizer applies before splitting). Tables are
// generated from the Unicode database by tools/unicode/gen_nfc_tables.py.
#include <string>
#include <string_view>

namespace edgevl::text {

// Returns the NFC form of valid UTF-8 text. Text that is not valid UTF-8 is returned
// unchanged (the reference tokenizers only ever see valid strings).
std::string nfc_normalize(std::string_view s);

// True when s certainly is already NFC (only code points below U+0300): the common fast path.
bool nfc_trivially_stable(std::string_view s);

}  // namespace edgevl::text
