#include "backend/qnn/htp_section.h"

#include "core/byte_io.h"
#include "core/error.h"

namespace edgevl::qnn {

namespace {

constexpr uint32_t kSectionVersion = 2;

void put_io(ByteWriter& w, const std::vector<HtpIoTensor>& io) {
  w.put<uint32_t>(uint32_t(io.size()));
  for (const HtpIoTensor& t : io) {
    w.put<uint32_t>(uint32_t(t.role));
    w.put<int32_t>(t.value);
    w.put<uint32_t>(t.desc.id);
    w.put_string(t.desc.name);
    w.put_vector(t.desc.dims);
    w.put<uint32_t>(uint32_t(t.desc.type.type));
    w.put_vector(t.desc.type.scales);
    w.put_vector(t.desc.type.offsets);
    w.put<int32_t>(t.desc.type.axis);
    w.put<uint32_t>(t.desc.type.bitwidth);
  }
}

std::vector<HtpIoTensor> get_io(ByteReader& r, uint32_t version) {
  const uint32_t n = r.get<uint32_t>();
  check(n <= r.remaining(), "{}: {} tensors exceed the section", r.what(), n);
  std::vector<HtpIoTensor> io(n);
  for (HtpIoTensor& t : io) {
    if (version >= 2) {
      const uint32_t role = r.get<uint32_t>();
      check(role <= uint32_t(HtpIoRole::VNew), "{}: tensor role {}", r.what(), role);
      t.role = HtpIoRole(role);
    }
    t.value = r.get<int32_t>();
    t.desc.id = r.get<uint32_t>();
    t.desc.name = r.get_string();
    t.desc.dims = r.get_vector<uint32_t>();
    t.desc.type.type = api::DataType(r.get<uint32_t>());
    t.desc.type.scales = r.get_vector<float>();
    t.desc.type.offsets = r.get_vector<int32_t>();
    t.desc.type.axis = r.get<int32_t>();
    t.desc.type.bitwidth = r.get<uint32_t>();
    check(t.desc.type.scales.size() == t.desc.type.offsets.size(),
          "{}: tensor {} has {} scales and {} offsets", r.what(), t.desc.name,
          t.desc.type.scales.size(), t.desc.type.offsets.size());
  }
  return io;
}

}  // namespace

std::vector<uint8_t> serialize_htp_section(const HtpSection& s) {
  ByteWriter w;
  w.put<uint32_t>(kSectionVersion);
  w.put_string(s.target.name());
  w.put<uint32_t>(s.target.soc_model);
  w.put<uint32_t>(s.fp16 ? 1 : 0);
  w.put<uint32_t>(s.shared_weights ? 1 : 0);
  w.put<uint32_t>(uint32_t(s.graphs.size()));
  for (const HtpGraphRecord& g : s.graphs) {
    w.put_string(g.graph);
    w.put<uint32_t>(uint32_t(g.segments.size()));
    for (const HtpSegmentRecord& seg : g.segments) {
      w.put<int32_t>(seg.first_op);
      w.put<int32_t>(seg.end_op);
      w.put_string(seg.name);
      put_io(w, seg.inputs);
      put_io(w, seg.outputs);
    }
  }
  w.put<uint64_t>(s.binary.size());
  w.put_bytes(s.binary.data(), s.binary.size());
  return std::move(w.buffer());
}

HtpSection parse_htp_section(std::span<const uint8_t> payload, const std::string& what) {
  ByteReader r(payload, what, 0);
  HtpSection s;
  const uint32_t version = r.get<uint32_t>();
  check(version >= 1 && version <= kSectionVersion,
        "{}: HTP section version {} (this edgevl reads 1 to {})", what, version, kSectionVersion);
  s.target = HtpTarget::parse(r.get_string());
  s.target.soc_model = r.get<uint32_t>();
  s.fp16 = r.get<uint32_t>() != 0;
  if (version >= 2) s.shared_weights = (r.get<uint32_t>() & 1) != 0;
  const uint32_t n_graphs = r.get<uint32_t>();
  check(n_graphs <= r.remaining(), "{}: {} graphs exceed the section", what, n_graphs);
  s.graphs.resize(n_graphs);
  for (HtpGraphRecord& g : s.graphs) {
    g.graph = r.get_string();
    const uint32_t n_seg = r.get<uint32_t>();
    check(n_seg <= r.remaining(), "{}: {} segments exceed the section", what, n_seg);
    g.segments.resize(n_seg);
    for (HtpSegmentRecord& seg : g.segments) {
      seg.first_op = r.get<int32_t>();
      seg.end_op = r.get<int32_t>();
      seg.name = r.get_string();
      seg.inputs = get_io(r, version);
      seg.outputs = get_io(r, version);
      check(0 <= seg.first_op && seg.first_op < seg.end_op, "{}: segment {} spans ops {}..{}", what,
            seg.name, seg.first_op, seg.end_op);
    }
  }
  const uint64_t n = r.get<uint64_t>();
  s.binary_view = r.get_bytes(size_t(n));
  check(r.remaining() == 0, "{}: {} bytes after the context binary", what, r.remaining());
  return s;
}

}  // namespace edgevl::qnn
