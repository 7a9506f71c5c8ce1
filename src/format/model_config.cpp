#include "format/model_config.h"

namespace edgevl {

void FamilyFlags::set(std::string_view name, Value v) {
  for (Flag& f : items_)
    if (f.name == name) {
      f.value = v;
      return;
    }
  items_.push_back({std::string(name), v});
}

const FamilyFlags::Flag* FamilyFlags::find(std::string_view name) const {
  for (const Flag& f : items_)
    if (f.name == name) return &f;
  return nullptr;
}

template <class T>
T FamilyFlags::get(std::string_view name, T dflt) const {
  const Flag* f = find(name);
  if (!f) return dflt;
  check(std::holds_alternative<T>(f->value), "model config: flag '{}' is not {}", name,
        std::is_same_v<T, float> ? "a float" : "an int");
  return std::get<T>(f->value);
}
int32_t FamilyFlags::get_int(std::string_view name, int32_t dflt) const {
  return get(name, dflt);
}
float FamilyFlags::get_float(std::string_view name, float dflt) const {
  return get(name, dflt);
}

namespace {

// The family flags' payload: per flag its type (u8: 1 int32, 2 float32; append only), its name
// (u8 length, 1-255 bytes) and its 4-byte value, in the order the family set them.
enum class FlagType : uint8_t { Int32 = 1, Float32 = 2 };

void write_flags(ByteWriter& w, const FamilyFlags& flags) {
  for (const FamilyFlags::Flag& f : flags.items()) {
    check(!f.name.empty() && f.name.size() <= 255, "internal: family flag name '{}'", f.name);
    const bool is_int = std::holds_alternative<int32_t>(f.value);
    w.put<uint8_t>(uint8_t(is_int ? FlagType::Int32 : FlagType::Float32));
    w.put<uint8_t>(uint8_t(f.name.size()));
    w.put_bytes(f.name.data(), f.name.size());
    if (is_int)
      w.put(std::get<int32_t>(f.value));
    else
      w.put(std::get<float>(f.value));
  }
}

FamilyFlags read_flags(std::span<const uint8_t> payload, const std::string& what) {
  ByteReader r(payload, what + " family flags");
  FamilyFlags flags;
  while (r.remaining() > 0) {
    const uint8_t type = r.get<uint8_t>();
    const std::span<const uint8_t> name = r.get_bytes(r.get<uint8_t>());
    const std::string n(reinterpret_cast<const char*>(name.data()), name.size());
    check(!n.empty() && !flags.has(n), "{}: family flag '{}' is empty or repeated", what, n);
    if (type == uint8_t(FlagType::Int32))
      flags.set(n, r.get<int32_t>());
    else if (type == uint8_t(FlagType::Float32))
      flags.set(n, r.get<float>());
    else
      fail("{}: family flag '{}' has type {}, which this edgevl does not know; recompile the model",
           what, n, type);
  }
  return flags;
}

// Each field is written as (tag u16, byte length u32, payload). A reader skips tags it does
// not know, so fields can be appended without breaking older binaries' readers.
class TagWriter {
 public:
  explicit TagWriter(ByteWriter& w) : w_(w) {}
  template <class T>
  void field(uint16_t tag, const T& v) {
    w_.put<uint16_t>(tag);
    w_.put<uint32_t>(sizeof(T));
    w_.put(v);
  }
  void field(uint16_t tag, const std::string& v) {
    w_.put<uint16_t>(tag);
    w_.put<uint32_t>(uint32_t(v.size()));
    w_.put_bytes(v.data(), v.size());
  }
  void field(uint16_t tag, const std::vector<int32_t>& v) {
    w_.put<uint16_t>(tag);
    w_.put<uint32_t>(uint32_t(v.size() * 4));
    w_.put_bytes(v.data(), v.size() * 4);
  }
  void field(uint16_t tag, const FamilyFlags& v) {
    ByteWriter payload;
    write_flags(payload, v);
    w_.put<uint16_t>(tag);
    w_.put<uint32_t>(uint32_t(payload.size()));
    w_.put_bytes(payload.buffer().data(), payload.size());
  }
  void end() { w_.put<uint16_t>(0); }

 private:
  ByteWriter& w_;
};

class TagReader {
 public:
  explicit TagReader(ByteReader& r) : r_(r) {}
  // Returns the next tag (0 at the end) and its payload.
  uint16_t next(std::span<const uint8_t>* payload) {
    const uint16_t tag = r_.get<uint16_t>();
    if (tag == 0) return 0;
    const uint32_t n = r_.get<uint32_t>();
    *payload = r_.get_bytes(n);
    return tag;
  }
  template <class T>
  T as(std::span<const uint8_t> p, uint16_t tag) {
    check(p.size() == sizeof(T), "{}: config field {} has {} bytes, expected {}", r_.what(), tag,
          p.size(), sizeof(T));
    T v;
    std::memcpy(&v, p.data(), sizeof(T));
    return v;
  }
  std::vector<int32_t> as_ids(std::span<const uint8_t> p) {
    std::vector<int32_t> v(p.size() / 4);
    if (!v.empty()) std::memcpy(v.data(), p.data(), v.size() * 4);  // no null pointer when empty
    return v;
  }

 private:
  ByteReader& r_;
};

// Binaries written before families were named carry the family as an enum under tag 1.
struct LegacyArch {
  uint32_t value = ~0u;
};
const char* legacy_family_name(uint32_t arch) {
  static const char* kNames[] = {"llama", "qwen2", "internlm2"};
  return arch < 3 ? kNames[arch] : "";
}

// The single list of LlmConfig fields and their tags. Append only; tag 1 is retired (see
// LegacyArch), and so are 13-15 and 20 (qkv_bias, o_bias, mlp_bias, qk_norm up to format 7:
// family flags now, tag 21).
template <class V, class C>
void visit_llm(V& v, C& c) {
  v(2, c.vocab_size);
  v(3, c.hidden);
  v(4, c.n_layers);
  v(5, c.n_heads);
  v(6, c.n_kv_heads);
  v(7, c.head_dim);
  v(8, c.ffn);
  v(9, c.norm_eps);
  v(10, c.rope_theta);
  v(11, c.max_position);
  v(12, c.tie_embeddings);
  v(16, c.bos_id);
  v(17, c.eos_id);
  v(18, c.extra_eos_ids);
  v(19, c.family);
  v(21, c.flags);
}

template <class V, class C>
void visit_runtime(V& v, C& c) {
  v(1, c.context);
  v(2, c.prefill_chunk);
  v(3, c.kv_type);
  v(4, c.embedding_tensor);
}

template <class V, class C>
void visit_vision(V& v, C& c) {
  v(1, c.image_size);
  v(2, c.patch_size);
  v(3, c.hidden);
  v(4, c.n_layers);
  v(5, c.n_heads);
  v(6, c.ffn);
  v(7, c.norm_eps);
  v(8, c.proj_norm_eps);
  v(9, c.shuffle);
  v(10, c.llm_hidden);
  v(11, c.min_tiles);
  v(12, c.max_tiles);
  v(13, c.use_thumbnail);
  v(14, c.img_start_id);
  v(15, c.img_end_id);
  v(16, c.img_context_id);
  v(17, c.mean);
  v(18, c.std);
}

template <class Cfg, class Visit>
void write_tagged(ByteWriter& w, const Cfg& c, Visit visit) {
  TagWriter tw(w);
  auto put = [&](uint16_t tag, const auto& field) { tw.field(tag, field); };
  visit(put, c);
  tw.end();
}

template <class Cfg, class Visit>
Cfg read_tagged(ByteReader& r, Visit visit) {
  Cfg c;
  TagReader tr(r);
  std::span<const uint8_t> payload;
  for (uint16_t tag; (tag = tr.next(&payload)) != 0;) {
    auto get = [&](uint16_t t, auto& field) {
      if (t != tag) return;
      using T = std::decay_t<decltype(field)>;
      if constexpr (std::is_same_v<T, std::vector<int32_t>>)
        field = tr.as_ids(payload);
      else if constexpr (std::is_same_v<T, std::string>)
        field.assign(reinterpret_cast<const char*>(payload.data()), payload.size());
      else if constexpr (std::is_same_v<T, FamilyFlags>)
        field = read_flags(payload, r.what());
      else
        field = tr.template as<T>(payload, tag);
    };
    visit(get, c);
  }
  return c;
}

}  // namespace

void write_config(ByteWriter& w, const LlmConfig& c) {
  write_tagged(w, c, [](auto& v, const LlmConfig& cc) { visit_llm(v, cc); });
}
LlmConfig read_llm_config(ByteReader& r) {
  LegacyArch legacy;
  LlmConfig c = read_tagged<LlmConfig>(r, [&](auto& v, LlmConfig& cc) {
    v(1, legacy.value);
    visit_llm(v, cc);
  });
  if (c.family.empty()) c.family = legacy_family_name(legacy.value);
  return c;
}
void write_config(ByteWriter& w, const RuntimeConfig& c) {
  write_tagged(w, c, [](auto& v, const RuntimeConfig& cc) { visit_runtime(v, cc); });
}
void write_config(ByteWriter& w, const VisionConfig& c) {
  write_tagged(w, c, [](auto& v, const VisionConfig& cc) { visit_vision(v, cc); });
}
VisionConfig read_vision_config(ByteReader& r) {
  return read_tagged<VisionConfig>(r, [](auto& v, VisionConfig& c) { visit_vision(v, c); });
}
RuntimeConfig read_runtime_config(ByteReader& r) {
  return read_tagged<RuntimeConfig>(r, [](auto& v, RuntimeConfig& c) { visit_runtime(v, c); });
}

}  // namespace edgevl
