#pragma once
// sentencepiece's tokenizer.model (a protobuf ModelProto) read and written by hand: only the
// fields a BPE tokenizer needs. The reader parses untrusted bytes and checks every length.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace edgevl::compiler {

struct SpPiece {
  std::string piece;
  float score = 0.0f;
  int32_t type = 1;  // ModelProto.SentencePiece.Type: NORMAL=1 ... BYTE=6
};

struct SpModel {
  std::vector<SpPiece> pieces;
  // trainer_spec (protobuf defaults)
  int32_t model_type = 1;  // UNIGRAM=1, BPE=2, WORD=3, CHAR=4
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  // normalizer_spec
  std::string normalizer_name;
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// `what` names the source in errors (e.g. the file path).
SpModel parse_sentencepiece_model(std::span<const uint8_t> bytes, const std::string& what);
std::vector<uint8_t> serialize_sentencepiece_model(const SpModel& m);

// Refuses (edgevl::Error) what the runtime does not implement: unigram models, non-identity
// normalization, whitespace-as-suffix.
text::TokenizerData tokenizer_from_sentencepiece(const SpModel& m, const std::string& what);

}  // namespace edgevl::compiler
