#include "format/evb.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/byte_io.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/packed_layout.h"

namespace edgevl {

const char* section_name(SectionId id) {
  switch (id) {
    case SectionId::LlmConfig: return "llm_config";
    case SectionId::RuntimeConfig: return "runtime_config";
    case SectionId::Graphs: return "graphs";
    case SectionId::Tensors: return "tensors";
    case SectionId::Tokenizer: return "tokenizer";
    case SectionId::ChatTemplate: return "chat_template";
    case SectionId::Preprocess: return "preprocess";
    case SectionId::Weights: return "weights";
    case SectionId::VisionConfig: return "vision_config";
    case SectionId::Htp: return "htp";
  }
  return "unknown";
}

const char* target_isa_name(TargetIsa t) {
  switch (t) {
    case TargetIsa::Any: return "any";
    case TargetIsa::X86_64: return "x86-64";
    case TargetIsa::AArch64: return "aarch64";
  }
  return "unknown";
}

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t TensorEntry::expected_bytes() const {
  if (source != TensorSource::File) {
    check(dtype == DType::F32 && shape.size() == 2, "a computed tensor is a f32 matrix");
    return 0;
  }
  switch (dtype) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return uint64_t(numel()) * dtype_size(dtype);
    case DType::BF16P:
      check(shape.size() == 2, "bf16p needs a [out, in] matrix");
      return uint64_t(layout::bf16p_bytes(shape[0], shape[1]));
    case DType::Q8:
      check(shape.size() == 2 && shape[1] <= layout::kMaxQuantK, "q8 needs a [out, in] matrix");
      return uint64_t(layout::q8_packed_bytes(shape[0], shape[1]));
    case DType::Q4:
      check(shape.size() == 2 && shape[1] <= layout::kMaxQuantK &&
                (group == 32 || group == 64 || group == 128),
            "q4 needs a [out, in] matrix and a group of 32, 64 or 128 (got {})", group);
      return uint64_t(layout::q4_packed_bytes(shape[0], shape[1], group, zero_point));
    default: fail("unsupported tensor type {}", uint32_t(dtype));
  }
}

std::string TensorEntry::type_name() const {
  std::string s(dtype_name(dtype));
  if (dtype == DType::Q4) s.append("g").append(std::to_string(group)).append(zero_point ? "z" : "");
  if (act8) s.append("a8");
  return s;
}

namespace {

uint64_t align_up(uint64_t n, uint64_t a) {
  return (n + a - 1) / a * a;
}

void write_tensor_table(ByteWriter& w, const std::vector<TensorEntry>& ts) {
  w.put<uint32_t>(uint32_t(ts.size()));
  for (const auto& t : ts) {
    w.put_string(t.name);
    w.put<uint32_t>(uint32_t(t.dtype));
    w.put_vector(t.shape);
    w.put<uint64_t>(t.offset);
    w.put<uint64_t>(t.bytes);
    w.put<uint16_t>(t.group);
    w.put<uint8_t>(t.zero_point ? 1 : 0);
    w.put<uint8_t>(t.act8 ? 1 : 0);
    w.put<uint16_t>(t.rotation);
    w.put<uint8_t>(uint8_t(t.source));
  }
}

}  // namespace

void write_evb(const std::filesystem::path& path, EvbWriteInput in) {
  // Weight offsets first: the tensor table is a section and must know them.
  uint64_t woff = 0;
  for (auto& t : in.tensors) {
    woff = align_up(woff, kEvbAlign);
    t.offset = woff;
    woff += t.bytes;
  }
  const uint64_t weights_size = woff;
  ByteWriter table;
  write_tensor_table(table, in.tensors);
  in.sections.emplace_back(SectionId::Tensors, std::move(table.buffer()));

  const size_t n_sections = in.sections.size() + 1;  // + weights
  const uint64_t table_off = kEvbHeaderSize;
  uint64_t off = align_up(table_off + n_sections * 24, kEvbAlign);
  std::vector<EvbSection> entries;
  for (const auto& [id, bytes] : in.sections) {
    entries.push_back({id, off, bytes.size()});
    off = align_up(off + bytes.size(), kEvbAlign);
  }
  entries.push_back({SectionId::Weights, off, weights_size});

  ByteWriter head;
  head.put_bytes(kEvbMagic, 8);
  head.put<uint32_t>(kEvbFormatVersion);
  head.put<uint32_t>(uint32_t(in.target.isa));
  head.put<uint64_t>(in.target.required_features);
  char producer[64] = {};
  std::strncpy(producer, in.producer.c_str(), sizeof(producer) - 1);
  head.put_bytes(producer, sizeof(producer));
  head.put<uint32_t>(uint32_t(n_sections));
  head.put<uint32_t>(0);  // reserved
  head.put<uint64_t>(table_off);
  head.put<uint64_t>(off + weights_size);  // total file size, checked at load
  head.align(kEvbHeaderSize);
  for (const auto& e : entries) {
    head.put<uint32_t>(uint32_t(e.id));
    head.put<uint32_t>(0);
    head.put<uint64_t>(e.offset);
    head.put<uint64_t>(e.size);
  }

  const std::filesystem::path tmp = path.string() + ".partial";
  // Whatever fails below (a bad tensor, a full disk), no partial file is left behind.
  struct RemoveOnFailure {
    const std::filesystem::path& p;
    bool armed = true;
    ~RemoveOnFailure() {
      std::error_code ec;
      if (armed) std::filesystem::remove(p, ec);
    }
  } guard{tmp};
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("{}: cannot open for writing", tmp.string());
    auto pad_to = [&](uint64_t pos) {
      static const char zeros[kEvbAlign] = {};
      const uint64_t cur = uint64_t(out.tellp());
      if (pos > cur) out.write(zeros, std::streamsize(pos - cur));
    };
    out.write(reinterpret_cast<const char*>(head.buffer().data()), std::streamsize(head.size()));
    for (size_t i = 0; i < in.sections.size(); ++i) {
      pad_to(entries[i].offset);
      const auto& bytes = in.sections[i].second;
      out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    }
    std::vector<uint8_t> buf;
    for (size_t i = 0; i < in.tensors.size(); ++i) {
      pad_to(off + in.tensors[i].offset);
      buf.assign(in.tensors[i].bytes, 0);
      if (in.tensors[i].source == TensorSource::File) in.fill_tensor(i, buf.data());
      out.write(reinterpret_cast<const char*>(buf.data()), std::streamsize(buf.size()));
      if (in.progress) in.progress(i + 1, in.tensors.size());
      if (!out) break;
    }
    out.flush();
    if (!out) fail("{}: write failed (disk full?)", tmp.string());
  }
  std::filesystem::rename(tmp, path);
  guard.armed = false;
}

EvbFile::EvbFile(const std::filesystem::path& path) : file_(path) {
  const std::string& p = file_.path();
  check(file_.size() >= kEvbHeaderSize, "{}: truncated: {} bytes, an .evb header needs {}", p,
        file_.size(), kEvbHeaderSize);
  ByteReader h(file_.bytes(), p);
  auto magic = h.get_bytes(8);
  check(std::memcmp(magic.data(), kEvbMagic, 8) == 0,
        "{}: not an edgevl context binary (bad magic at offset 0; expected \"EDGEVLB1\")", p);
  version_ = h.get<uint32_t>();
  check(version_ == kEvbFormatVersion,
        "{}: format version {} but this edgevl reads version {}; recompile the model with this "
        "edgevl (`edgevl compile`)",
        p, version_, kEvbFormatVersion);
  target_.isa = TargetIsa(h.get<uint32_t>());
  target_.required_features = h.get<uint64_t>();
  auto prod = h.get_bytes(64);
  producer_.assign(reinterpret_cast<const char*>(prod.data()),
                   strnlen(reinterpret_cast<const char*>(prod.data()), 64));
  const uint32_t n_sections = h.get<uint32_t>();
  h.get<uint32_t>();
  const uint64_t table_off = h.get<uint64_t>();
  const uint64_t total = h.get<uint64_t>();
  check(total == file_.size(),
        "{}: file is {} bytes but its header says {}: truncated or corrupted (re-copy or "
        "recompile it)",
        p, file_.size(), total);
  check(n_sections <= 64 && table_off <= file_.size() &&
            uint64_t(n_sections) * 24 <= file_.size() - table_off,
        "{}: section table at offset {} ({} entries) lies outside the file", p, table_off,
        n_sections);
  check_target_supported(target_, p);

  ByteReader t(file_.bytes().subspan(table_off, size_t(n_sections) * 24), p, table_off);
  for (uint32_t i = 0; i < n_sections; ++i) {
    EvbSection s;
    s.id = SectionId(t.get<uint32_t>());
    t.get<uint32_t>();
    s.offset = t.get<uint64_t>();
    s.size = t.get<uint64_t>();
    check(s.offset <= file_.size() && s.size <= file_.size() - s.offset,
          "{}: section '{}' at offset {} with {} bytes lies outside the file ({} bytes)", p,
          section_name(s.id), s.offset, s.size, file_.size());
    sections_.push_back(s);
  }
  const size_t wsec = section_offset(SectionId::Weights);
  check(wsec % kEvbAlign == 0, "{}: weights section at offset {} is not 64-byte aligned", p, wsec);
  weights_ = file_.data() + wsec;
  const uint64_t wsize = section(SectionId::Weights).size();

  ByteReader tr(section(SectionId::Tensors), p + " section 'tensors'",
                section_offset(SectionId::Tensors));
  const uint32_t nt = tr.get<uint32_t>();
  check(nt <= tr.remaining(), "{}: tensor count {} exceeds its section", p, nt);
  tensors_.resize(nt);
  for (auto& e : tensors_) {
    e.name = tr.get_string();
    e.dtype = DType(tr.get<uint32_t>());
    e.shape = tr.get_vector<int64_t>();
    e.offset = tr.get<uint64_t>();
    e.bytes = tr.get<uint64_t>();
    e.group = tr.get<uint16_t>();
    e.zero_point = tr.get<uint8_t>() != 0;
    e.act8 = tr.get<uint8_t>() != 0;
    e.rotation = tr.get<uint16_t>();
    const uint8_t source = tr.get<uint8_t>();
    check(source <= uint8_t(TensorSource::RopeSin), "{}: tensor '{}' has an unknown source {}", p,
          e.name, source);
    e.source = TensorSource(source);
    const uint16_t r = e.rotation;
    check(r == 0 || ((e.dtype == DType::Q8 || e.dtype == DType::Q4) && e.shape.size() == 2 &&
                     r >= 2 && r <= 64 && (r & (r - 1)) == 0),
          "{}: tensor '{}' has a rotation block of {}: only an int8 or int4 matrix has one, a "
          "power of two in [2, 64]",
          p, e.name, r);
    uint64_t n = 1;
    for (int64_t d : e.shape) {
      check(d > 0 && d < (int64_t(1) << 40), "{}: tensor '{}' has a bad dimension {}", p, e.name,
            d);
      n *= uint64_t(d);
      check(n < (uint64_t(1) << 48), "{}: tensor '{}' is impossibly large", p, e.name);
    }
    uint64_t want = 0;
    try {
      want = e.expected_bytes();
    } catch (const Error& err) {
      fail("{}: tensor '{}': {}", p, e.name, err.what());
    }
    check(e.bytes == want, "{}: tensor '{}' holds {} bytes, expected {} for {} {}", p, e.name,
          e.bytes, want, n, e.type_name());
    check(e.offset % kEvbAlign == 0 && e.offset <= wsize && e.bytes <= wsize - e.offset,
          "{}: tensor '{}' at weights offset {} (+{} bytes) lies outside the weights section "
          "({} bytes at file offset {})",
          p, e.name, e.offset, e.bytes, wsize, wsec);
  }
}

bool EvbFile::has_section(SectionId id) const {
  for (const auto& s : sections_)
    if (s.id == id) return true;
  return false;
}

size_t EvbFile::section_offset(SectionId id) const {
  for (const auto& s : sections_)
    if (s.id == id) return s.offset;
  fail("{}: section '{}' missing: the file is corrupted or was made by another tool", file_.path(),
       section_name(id));
}

std::span<const uint8_t> EvbFile::section(SectionId id) const {
  for (const auto& s : sections_)
    if (s.id == id) return file_.bytes().subspan(s.offset, s.size);
  fail("{}: section '{}' missing: the file is corrupted or was made by another tool", file_.path(),
       section_name(id));
}

int32_t EvbFile::find_tensor(std::string_view name) const {
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].name == name) return int32_t(i);
  return -1;
}

std::string evb_missing_features(const EvbTarget& t, std::string_view cpu_features) {
  const auto has = [&](std::string_view name) {
    for (size_t pos = 0; pos <= cpu_features.size();) {
      const size_t end = std::min(cpu_features.find(' ', pos), cpu_features.size());
      if (cpu_features.substr(pos, end - pos) == name) return true;
      pos = end + 1;
    }
    return false;
  };
  const auto names = cpu::cpu_feature_names();
  std::string missing;
  for (size_t i = 0; i < 64; ++i) {
    if (((t.required_features >> i) & 1) == 0) continue;
    const std::string name =
        i < names.size() ? std::string(names[i].name) : fmt::format("feature-bit-{}", i);
    if (!has(name)) missing += (missing.empty() ? "" : " ") + name;
  }
  return missing;
}

void check_target_supported(const EvbTarget& t, const std::string& path) {
#if defined(__x86_64__)
  constexpr TargetIsa here = TargetIsa::X86_64;
#elif defined(__aarch64__)
  constexpr TargetIsa here = TargetIsa::AArch64;
#else
  constexpr TargetIsa here = TargetIsa::Any;
#endif
  check(t.isa == TargetIsa::Any || t.isa == here,
        "{}: compiled for target {} but this machine is {}; recompile the model on this "
        "machine (`edgevl compile`)",
        path, target_isa_name(t.isa), target_isa_name(here));
  // A binary whose layouts need CPU features (none that `edgevl compile` writes today: its
  // panels serve every level) runs only where the CPU has them, whatever --isa says.
  const std::string cpu = cpu::cpu_features_string();
  const std::string missing = evb_missing_features(t, cpu);
  check(missing.empty(),
        "{}: packed for target {} with CPU features {}, but this CPU lacks {} (it has: {}); "
        "recompile the model on this machine (`edgevl compile`)",
        path, target_isa_name(t.isa), evb_missing_features(t, ""), missing, cpu);
}

}  // namespace edgevl

namespace edgevl {

void set_evb_section(const std::filesystem::path& path, SectionId id,
                     std::vector<uint8_t> payload) {
  const std::filesystem::path copy = path.string() + ".old";
  std::filesystem::rename(path, copy);
  struct Restore {
    const std::filesystem::path &from, &to;
    bool armed = true;
    ~Restore() {
      std::error_code ec;
      if (armed)
        std::filesystem::rename(from, to, ec);
      else
        std::filesystem::remove(from, ec);
    }
  } restore{copy, path};
  {
    const EvbFile f(copy);
    EvbWriteInput in;
    in.target = f.target();
    in.producer = f.producer();
    for (const EvbSection& s : f.sections()) {
      if (s.id == SectionId::Tensors || s.id == SectionId::Weights || s.id == id) continue;
      const auto bytes = f.section(s.id);
      in.sections.emplace_back(s.id, std::vector<uint8_t>(bytes.begin(), bytes.end()));
    }
    in.sections.emplace_back(id, std::move(payload));
    in.tensors = f.tensors();
    in.fill_tensor = [&](size_t i, uint8_t* out) {
      if (const uint8_t* d = f.tensor_data(i)) std::memcpy(out, d, f.tensors()[i].bytes);
    };
    write_evb(path, std::move(in));
  }
  restore.armed = false;
}

}  // namespace edgevl
