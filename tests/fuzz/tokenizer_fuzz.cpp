// libFuzzer target for the two parsers of untrusted tokenizer bytes: the .evb tokenizer
// section reader (with its stored lookup tables) and the sentencepiece tokenizer.model
// protobuf reader. The first input byte
// picks the parser; whatever loads is also exercised by encode/decode. Any exception other
// than edgevl::Error, or any crash, is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "compiler/sentencepiece_proto.h"
#include "core/error.h"
#include "text/tokenizer.h"

namespace {

void exercise(const edgevl::text::Tokenizer& tok, std::span<const uint8_t> rest) {
  const std::string_view text(reinterpret_cast<const char*>(rest.data()),
                              rest.size() < 256 ? rest.size() : 256);
  const auto ids = tok.encode(text, true);
  (void)edgevl::text::decode(tok, ids, false);
  (void)tok.encode(text, false);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const uint8_t> body(data + 1, size - 1);
  try {
    if (data[0] & 1) {
      const auto model = edgevl::compiler::parse_sentencepiece_model(body, "fuzz.model");
      const edgevl::text::Tokenizer tok(
          edgevl::compiler::tokenizer_from_sentencepiece(model, "fuzz.model"));
      exercise(tok, body);
    } else {
      // The runtime path: the section used in place, tables probed as stored.
      const auto tok = edgevl::text::Tokenizer::from_section(body, "fuzz tokenizer section");
      exercise(tok, body);
      (void)tok.to_data();
    }
  } catch (const edgevl::Error&) {
  }
  return 0;
}
