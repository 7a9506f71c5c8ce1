#include "runtime/execution/htp_state_io.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/error.h"
#include "runtime/execution/rope_positions.h"

namespace edgevl {

namespace {

void put_f16(std::vector<uint8_t>& out, size_t i, float x) {
  const uint16_t h = f32_to_f16(x);
  std::memcpy(&out[i * 2], &h, 2);
}

float get_f16(const std::vector<uint8_t>& in, size_t i) {
  uint16_t h;
  std::memcpy(&h, &in[i * 2], 2);
  return f16_to_f32(h);
}

const Op& op_at(const GraphRun& r, int32_t index, OpType type) {
  const Graph& g = r.graph();
  check(index >= 0 && index < int32_t(g.ops.size()) && g.ops[size_t(index)].type == type,
        "internal: HTP state for op {} of graph '{}', not a {}", index, g.name, op_name(type));
  return g.ops[size_t(index)];
}

// [W, 1, head_dim]: cos of each rotated pair twice and 1 for the dims that pass; sin with the
// first half negated (rotate_half's sign) and 0 for the dims that pass. Rows past the valid
// ones are the identity rotation.
void rope_input(const Op& op, bool sin, const GraphRun& r, std::vector<uint8_t>& out) {
  const RopeAttrs a = op.rope();
  const int64_t w = r.graph().width, d = a.head_dim, half = a.rotated() / 2;
  const TensorEntry& table = r.weight(op.inputs[1]);
  check(table.shape.size() == 2 && table.shape[1] == half,
        "internal: Rope table '{}' is not [positions, {}]", table.name, half);
  thread_local std::vector<float> cs, sn;
  cs.resize(size_t(r.rows * half));
  sn.resize(size_t(r.rows * half));
  rope_rows(a, r.f(op.inputs[1]), r.f(op.inputs[2]), table.shape[0], r.positions, r.rope_thw,
            r.rows, cs.data(), sn.data());
  out.assign(size_t(w * d) * 2, 0);
  for (int64_t i = 0; i < w; ++i)
    for (int64_t f = 0; f < d; ++f) {
      float x = sin ? 0.f : 1.f;
      if (i < r.rows && f < 2 * half) {
        const size_t k = size_t(i * half + f % half);
        x = sin ? (f < half ? -sn[k] : sn[k]) : cs[k];
      }
      put_f16(out, size_t(i * d + f), x);
    }
}

// [W, C + W]: row i (position pos0 + i) sees the first pos0 cache slots and chunk rows <= i.
void mask_input(const qnn::HtpSegment& seg, const GraphRun& r, std::vector<uint8_t>& out) {
  const int64_t w = r.graph().width, c = seg.context, pos0 = r.positions[0];
  check(pos0 <= c, "HTP: position {} is past the {} cache slots the HTP graphs were compiled for",
        pos0, c);
  out.resize(size_t(w * (c + w)) * 2);
  for (int64_t i = 0; i < w; ++i)
    for (int64_t j = 0; j < c + w; ++j)
      put_f16(out, size_t(i * (c + w) + j),
              (j < c ? j < pos0 : j - c <= i) ? 0.f : qnn::kMaskedScore);
}

// [kv_heads, C, head_dim]: the cache's first pos0 slots (the rest are masked; zeros).
void past_input(const qnn::HtpSegment& seg, const Op& op, bool values, const GraphRun& r,
                std::vector<uint8_t>& out) {
  check(!r.per_row() && r.kv != nullptr, "internal: HTP attention in graph '{}' without its cache",
        r.graph().name);
  const AttentionAttrs at = op.attention();
  const KvCaches& kv = *r.kv;
  const int64_t c = seg.context, d = at.head_dim, pos0 = r.positions[0];
  check(kv.capacity <= c, "HTP: a KV cache of {} tokens; the HTP graphs hold {}", kv.capacity, c);
  const uint8_t* cache = (*(values ? kv.v : kv.k))[size_t(op.layer)];
  out.assign(size_t(at.n_kv_heads * c * d) * 2, 0);
  thread_local std::vector<float> rows;
  for (int h = 0; h < at.n_kv_heads; ++h) {
    uint8_t* dst = out.data() + size_t(h * c * d) * 2;
    if (kv.type == DType::F16) {  // the same bytes, head by head
      std::memcpy(dst, cache + size_t(h * kv.capacity * d) * 2, size_t(pos0 * d) * 2);
      continue;
    }
    rows.resize(size_t(pos0 * d));
    cpu::kv_head_to_f32(cache, kv.type, at.n_kv_heads, int(d), kv.capacity, h, pos0, rows.data());
    for (int64_t i = 0; i < pos0 * d; ++i) {
      const uint16_t x = f32_to_f16(rows[size_t(i)]);
      std::memcpy(dst + i * 2, &x, 2);
    }
  }
}

}  // namespace

void htp_state_input(const qnn::HtpSegment& seg, const qnn::HtpIo& io, const GraphRun& r,
                     std::vector<uint8_t>& out) {
  using qnn::HtpIoRole;
  switch (io.role) {
    case HtpIoRole::RopeCos:
    case HtpIoRole::RopeSin:
      return rope_input(op_at(r, io.index, OpType::Rope), io.role == HtpIoRole::RopeSin, r, out);
    case HtpIoRole::Mask: return mask_input(seg, r, out);
    case HtpIoRole::KPast:
    case HtpIoRole::VPast:
      return past_input(seg, op_at(r, io.index, OpType::Attention), io.role == HtpIoRole::VPast, r,
                        out);
    default: fail("internal: HTP graph input of role {}", uint32_t(io.role));
  }
}

void htp_store_kv(int32_t op_index, const std::vector<uint8_t>& k_new,
                  const std::vector<uint8_t>& v_new, const GraphRun& r) {
  const Op& op = op_at(r, op_index, OpType::Attention);
  const AttentionAttrs at = op.attention();
  const int64_t w = r.graph().width, d = at.head_dim, kvh = at.n_kv_heads, m = r.rows;
  check(k_new.size() == size_t(kvh * w * d) * 2 && v_new.size() == k_new.size(),
        "internal: HTP keys of {} bytes for [{}, {}, {}]", k_new.size(), kvh, w, d);
  // [kv_heads][W][head_dim] -> the [rows][kv_heads * head_dim] kv_store takes.
  thread_local std::vector<float> k, v;
  k.resize(size_t(m * kvh * d));
  v.resize(k.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t h = 0; h < kvh; ++h)
      for (int64_t e = 0; e < d; ++e) {
        const size_t src = size_t((h * w + i) * d + e), dst = size_t((i * kvh + h) * d + e);
        k[dst] = get_f16(k_new, src);
        v[dst] = get_f16(v_new, src);
      }
  const KvCaches& kv = *r.kv;
  cpu::kv_store(k.data(), v.data(), m, int(kvh), int(d), r.positions[0], (*kv.k)[size_t(op.layer)],
                (*kv.v)[size_t(op.layer)], kv.type, kv.capacity);
}

}  // namespace edgevl
