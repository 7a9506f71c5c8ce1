// Protobuf wire format, just enough of it: varints, 32/64-bit fixed values and
// length-delimited fields; unknown fields are skipped, groups are refused.
#include "compiler/sentencepiece_proto.h"

#include <cstring>

#include "core/error.h"

namespace edgevl::compiler {
namespace {

class Wire {
 public:
  Wire(std::span<const uint8_t> b, const std::string& what, size_t base)
      : b_(b), what_(what), base_(base) {}
  bool done() const { return pos_ >= b_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      check(pos_ < b_.size(), "{}: truncated varint at offset {}", what_, base_ + pos_);
      const uint8_t c = b_[pos_++];
      v |= uint64_t(c & 0x7F) << shift;
      if (!(c & 0x80)) return v;
    }
    fail("{}: varint longer than 10 bytes at offset {}", what_, base_ + pos_);
  }
  std::span<const uint8_t> bytes(size_t n) {
    check(n <= b_.size() - pos_, "{}: field of {} bytes at offset {} runs past the end ({} left)",
          what_, n, base_ + pos_, b_.size() - pos_);
    auto s = b_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  // Reads a field key; returns false at the end of the message.
  bool key(uint32_t& field, uint32_t& wire) {
    if (done()) return false;
    const uint64_t k = varint();
    field = uint32_t(k >> 3);
    wire = uint32_t(k & 7);
    check(field != 0 && k >> 3 <= 0x1FFFFFFF, "{}: invalid field number at offset {}", what_,
          base_ + pos_);
    return true;
  }
  void skip(uint32_t wire) {
    switch (wire) {
      case 0: varint(); break;
      case 1: bytes(8); break;
      case 2: bytes(len()); break;
      case 5: bytes(4); break;
      default:
        fail("{}: unsupported protobuf wire type {} at offset {}", what_, wire, base_ + pos_);
    }
  }
  size_t len() {
    const uint64_t n = varint();
    check(n <= b_.size() - pos_, "{}: length {} at offset {} runs past the end ({} left)", what_, n,
          base_ + pos_, b_.size() - pos_);
    return size_t(n);
  }
  Wire sub() {
    const size_t n = len();
    Wire w(b_.subspan(pos_, n), what_, base_ + pos_);
    pos_ += n;
    return w;
  }
  std::string str() {
    auto s = bytes(len());
    return std::string(reinterpret_cast<const char*>(s.data()), s.size());
  }
  float f32() {
    auto s = bytes(4);
    float f;
    std::memcpy(&f, s.data(), 4);
    return f;
  }
  int32_t i32() { return int32_t(uint32_t(varint())); }  // negative int32 is sign-extended
  void expect(uint32_t wire, uint32_t want, uint32_t field, const char* msg) {
    check(wire == want, "{}: {} (field {}) has wire type {}, expected {}", what_, msg, field, wire,
          want);
  }
  const std::string& what() const { return what_; }

 private:
  std::span<const uint8_t> b_;
  const std::string& what_;
  size_t base_;
  size_t pos_ = 0;
};

SpPiece parse_piece(Wire w) {
  SpPiece p;
  uint32_t f, t;
  while (w.key(f, t)) {
    if (f == 1) {
      w.expect(t, 2, f, "piece");
      p.piece = w.str();
    } else if (f == 2) {
      w.expect(t, 5, f, "score");
      p.score = w.f32();
    } else if (f == 3) {
      w.expect(t, 0, f, "type");
      p.type = w.i32();
    } else {
      w.skip(t);
    }
  }
  return p;
}

void parse_trainer(Wire w, SpModel& m) {
  uint32_t f, t;
  while (w.key(f, t)) {
    auto as_int = [&](int32_t& dst, const char* name) {
      w.expect(t, 0, f, name);
      dst = w.i32();
    };
    auto as_bool = [&](bool& dst, const char* name) {
      w.expect(t, 0, f, name);
      dst = w.varint() != 0;
    };
    switch (f) {
      case 3: as_int(m.model_type, "trainer_spec.model_type"); break;
      case 24:
        as_bool(m.treat_whitespace_as_suffix, "trainer_spec.treat_whitespace_as_suffix");
        break;
      case 35: as_bool(m.byte_fallback, "trainer_spec.byte_fallback"); break;
      case 40: as_int(m.unk_id, "trainer_spec.unk_id"); break;
      case 41: as_int(m.bos_id, "trainer_spec.bos_id"); break;
      case 42: as_int(m.eos_id, "trainer_spec.eos_id"); break;
      case 43: as_int(m.pad_id, "trainer_spec.pad_id"); break;
      default: w.skip(t);
    }
  }
}

void parse_normalizer(Wire w, SpModel& m) {
  uint32_t f, t;
  while (w.key(f, t)) {
    switch (f) {
      case 1:
        w.expect(t, 2, f, "normalizer_spec.name");
        m.normalizer_name = w.str();
        break;
      case 2:
        w.expect(t, 2, f, "normalizer_spec.precompiled_charsmap");
        m.precompiled_charsmap = w.str();
        break;
      case 3:
        w.expect(t, 0, f, "normalizer_spec.add_dummy_prefix");
        m.add_dummy_prefix = w.varint();
        break;
      case 4:
        w.expect(t, 0, f, "normalizer_spec.remove_extra_whitespaces");
        m.remove_extra_whitespaces = w.varint();
        break;
      case 5:
        w.expect(t, 0, f, "normalizer_spec.escape_whitespaces");
        m.escape_whitespaces = w.varint();
        break;
      default: w.skip(t);
    }
  }
}

// --- writer ---
void put_varint(std::vector<uint8_t>& o, uint64_t v) {
  while (v >= 0x80) {
    o.push_back(uint8_t(v | 0x80));
    v >>= 7;
  }
  o.push_back(uint8_t(v));
}
void put_key(std::vector<uint8_t>& o, uint32_t field, uint32_t wire) {
  put_varint(o, (uint64_t(field) << 3) | wire);
}
void put_bytes(std::vector<uint8_t>& o, uint32_t field, std::string_view s) {
  put_key(o, field, 2);
  put_varint(o, s.size());
  o.insert(o.end(), s.begin(), s.end());
}
void put_int(std::vector<uint8_t>& o, uint32_t field, int64_t v) {
  put_key(o, field, 0);
  put_varint(o, uint64_t(v));
}
void put_msg(std::vector<uint8_t>& o, uint32_t field, const std::vector<uint8_t>& m) {
  put_bytes(o, field, std::string_view(reinterpret_cast<const char*>(m.data()), m.size()));
}

}  // namespace

SpModel parse_sentencepiece_model(std::span<const uint8_t> bytes, const std::string& what) {
  SpModel m;
  Wire w(bytes, what, 0);
  uint32_t f, t;
  while (w.key(f, t)) {
    if (f == 1) {
      w.expect(t, 2, f, "pieces");
      check(m.pieces.size() < (1u << 24), "{}: more than 16M pieces", what);
      m.pieces.push_back(parse_piece(w.sub()));
    } else if (f == 2) {
      w.expect(t, 2, f, "trainer_spec");
      parse_trainer(w.sub(), m);
    } else if (f == 3) {
      w.expect(t, 2, f, "normalizer_spec");
      parse_normalizer(w.sub(), m);
    } else {
      w.skip(t);
    }
  }
  return m;
}

std::vector<uint8_t> serialize_sentencepiece_model(const SpModel& m) {
  std::vector<uint8_t> out, tmp;
  for (const auto& p : m.pieces) {
    tmp.clear();
    put_bytes(tmp, 1, p.piece);
    put_key(tmp, 2, 5);
    uint8_t f[4];
    std::memcpy(f, &p.score, 4);
    tmp.insert(tmp.end(), f, f + 4);
    put_int(tmp, 3, p.type);
    put_msg(out, 1, tmp);
  }
  tmp.clear();
  put_int(tmp, 3, m.model_type);
  put_int(tmp, 4, int64_t(m.pieces.size()));
  if (m.treat_whitespace_as_suffix) put_int(tmp, 24, 1);
  put_int(tmp, 35, m.byte_fallback ? 1 : 0);
  put_int(tmp, 40, m.unk_id);
  put_int(tmp, 41, m.bos_id);
  put_int(tmp, 42, m.eos_id);
  put_int(tmp, 43, m.pad_id);
  put_msg(out, 2, tmp);
  tmp.clear();
  put_bytes(tmp, 1, m.normalizer_name);
  if (!m.precompiled_charsmap.empty()) put_bytes(tmp, 2, m.precompiled_charsmap);
  put_int(tmp, 3, m.add_dummy_prefix);
  put_int(tmp, 4, m.remove_extra_whitespaces);
  put_int(tmp, 5, m.escape_whitespaces);
  put_msg(out, 3, tmp);
  return out;
}

text::TokenizerData tokenizer_from_sentencepiece(const SpModel& m, const std::string& what) {
  using text::TokenType;
  check(m.model_type == 2,
        "{}: sentencepiece model type {} is not supported (only BPE, type 2; unigram models "
        "are not implemented)",
        what, m.model_type);
  check(!m.treat_whitespace_as_suffix, "{}: treat_whitespace_as_suffix is not supported", what);
  check(m.precompiled_charsmap.empty(),
        "{}: normalizer '{}' is not supported (only the identity normalizer is implemented)", what,
        m.normalizer_name);
  check(!m.pieces.empty(), "{}: the model has no pieces", what);
  const int32_t n = int32_t(m.pieces.size());
  text::TokenizerData d;
  d.kind = text::TokenizerKind::SentencePieceBpe;
  d.pieces.reserve(n);
  d.types.reserve(n);
  d.scores.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    const auto& p = m.pieces[i];
    check(p.type >= 1 && p.type <= 6, "{}: piece {} '{}' has unknown type {}", what, i, p.piece,
          p.type);
    check(!p.piece.empty(), "{}: piece {} is empty", what, i);
    d.pieces.push_back(p.piece);
    d.types.push_back(TokenType(p.type));
    d.scores.push_back(p.score);
    if (p.type == int(TokenType::Unknown)) d.unk_id = i;
  }
  check(d.unk_id >= 0, "{}: the model has no unknown piece", what);
  auto ctl = [&](int32_t id) {
    return id >= 0 && id < n && d.types[id] == TokenType::Control ? id : -1;
  };
  d.bos_id = ctl(m.bos_id);
  d.eos_id = ctl(m.eos_id);
  d.pad_id = ctl(m.pad_id);
  d.add_bos = d.bos_id >= 0;  // what HF's sentencepiece tokenizers do unless configured
  d.add_dummy_prefix = m.add_dummy_prefix;
  d.remove_extra_whitespaces = m.remove_extra_whitespaces;
  d.escape_whitespaces = m.escape_whitespaces;
  d.byte_fallback = m.byte_fallback;
  return d;
}

}  // namespace edgevl::compiler
