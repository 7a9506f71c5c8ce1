// Decode attention: one query row against its cache, split into tasks of (KV head, up to 8 of
// its query heads, range of keys) whose partial results are merged here. attention_rows runs
// several such rows (the rows of a decode batch or of a speculative verification) as one
// dispatch; every row takes exactly the tasks and the merge it takes alone, so its output is
// the same bits (the batch-invariance contract of README "Batched decode").
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/attention_decode.h"
#include "backend/cpu/isa_levels.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/kernels.h"
#include "core/error.h"
#include "core/kv_layout.h"

namespace edgevl::cpu {

namespace {

// How one row's keys split into tasks. Splitting the keys, not only the heads, keeps every
// thread streaming its own part of the cache (2 KV heads x 7 query heads gave 2 threads uneven
// head sets that read each cache row twice), and each K/V row is read once for all the heads
// of a set. The split depends only on the shapes and the pool's size, never on which other rows
// share the dispatch.
struct DecodePlan {
  int group = 0, n_sets = 0, per_set = 0;
  int64_t units = 0, ranges = 0, step = 0, tasks = 0, stride = 0;
};

DecodePlan plan(const AttnArgs& a, int64_t n_keys, int64_t threads) {
  DecodePlan p;
  p.group = a.n_heads / a.n_kv_heads;
  p.n_sets = (p.group + 7) / 8;
  p.per_set = (p.group + p.n_sets - 1) / p.n_sets;
  p.units = int64_t(a.n_kv_heads) * p.n_sets;
  // Ranges of at least kMinKeys keys (a range costs a task and a merge), about 4 tasks per
  // thread so a descheduled thread's share is picked up by the others.
  constexpr int64_t kMinKeys = 256;
  const int64_t want = std::max<int64_t>(1, (4 * threads + p.units - 1) / p.units);
  p.ranges = std::clamp<int64_t>(n_keys / kMinKeys, 1, want);
  p.step = (n_keys + p.ranges - 1) / p.ranges;
  p.step = (p.step + 63) / 64 * 64;  // whole blocks of the kernel
  p.ranges = (n_keys + p.step - 1) / p.step;
  p.tasks = p.units * p.ranges;
  p.stride = int64_t(p.per_set) * (a.head_dim + 2);
  return p;
}

// Task k of a row: its partial output rows, max and sum at parts + k * stride.
void run_task(const KernelTable& t, const AttnArgs& a, const DecodePlan& p, int64_t n_keys,
              int64_t k, float* parts) {
  const int64_t u = k / p.ranges, r = k % p.ranges;
  const int kvh = int(u / p.n_sets), set = int(u % p.n_sets);
  const int h0 = kvh * p.group + set * p.per_set;
  const int h1 = std::min(h0 + p.per_set, (kvh + 1) * p.group);
  float* o = parts + k * p.stride;
  const int64_t hd = a.head_dim;
  t.attention_part(a, 0, h0, h1, r * p.step, std::min(n_keys, (r + 1) * p.step), o,
                   o + p.per_set * hd, o + p.per_set * (hd + 1));
}

// out = sum_r e^(m_r - M) o_r / sum_r e^(m_r - M) l_r over the key ranges, M the largest m_r.
void merge(const AttnArgs& a, const DecodePlan& p, const float* parts) {
  const int64_t hd = a.head_dim;
  for (int64_t u = 0; u < p.units; ++u) {
    const int kvh = int(u / p.n_sets), set = int(u % p.n_sets);
    const int h0 = kvh * p.group + set * p.per_set;
    const int h1 = std::min(h0 + p.per_set, (kvh + 1) * p.group);
    for (int h = h0; h < h1; ++h) {
      const int g = h - h0;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t r = 0; r < p.ranges; ++r)
        mx = std::max(mx, parts[(u * p.ranges + r) * p.stride + p.per_set * hd + g]);
      float* out = a.out + int64_t(h) * hd;
      std::fill(out, out + hd, 0.f);
      float l = 0.f;
      for (int64_t r = 0; r < p.ranges; ++r) {
        const float* part = parts + (u * p.ranges + r) * p.stride;
        const float m = part[p.per_set * hd + g];
        if (m == -std::numeric_limits<float>::infinity()) continue;  // empty range
        const float w = std::exp(m - mx);
        l += w * part[p.per_set * (hd + 1) + g];
        const float* o = part + int64_t(g) * hd;
        for (int64_t d = 0; d < hd; ++d) out[d] += w * o[d];
      }
      const float inv = 1.f / l;
      for (int64_t d = 0; d < hd; ++d) out[d] *= inv;
    }
  }
}

// A short cache runs on the calling thread: a dispatch costs more than its attention.
constexpr int64_t kSerialKeys = 64;

}  // namespace

void attention_decode(ThreadPool& pool, const AttnArgs& a, int64_t n_keys) {
  if (n_keys <= 0) {
    std::fill(a.out, a.out + int64_t(a.n_heads) * a.head_dim, 0.f);
    return;
  }
  const DecodePlan p = plan(a, n_keys, pool.size());
  thread_local std::vector<float> parts;
  if (parts.size() < size_t(p.tasks * p.stride)) parts.resize(size_t(p.tasks * p.stride));
  float* base = parts.data();
  const KernelTable& t = active_kernels();
  if (p.tasks == 1 || n_keys * a.n_kv_heads <= kSerialKeys) {
    for (int64_t k = 0; k < p.tasks; ++k) run_task(t, a, p, n_keys, k, base);
  } else {
    pool.parallel_for(p.tasks, [&](int64_t k) { run_task(t, a, p, n_keys, k, base); });
  }
  merge(a, p, base);
}

void attention_rows(ThreadPool& pool, std::span<const AttentionRow> rows, int n_heads, int head_dim,
                    int n_kv_heads, float scale) {
  check(n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0 && head_dim > 0,
        "attention_rows: {} query heads is not a multiple of {} kv heads (head_dim {})", n_heads,
        n_kv_heads, head_dim);
  const size_t n = rows.size();
  // Called per layer of every batched step: the per-row bookkeeping is reused, not allocated.
  struct Scratch {
    std::vector<AttnArgs> args;
    std::vector<DecodePlan> plans;
    std::vector<int64_t> first, offset;  // tasks of rows < i; their parts' offset in floats
    std::vector<float> parts;
  };
  thread_local Scratch sc;
  std::vector<AttnArgs>& args = sc.args;
  std::vector<DecodePlan>& plans = sc.plans;
  std::vector<int64_t>&first = sc.first, &offset = sc.offset;
  args.resize(n);
  plans.assign(n, DecodePlan{});
  first.assign(n + 1, 0);
  offset.assign(n + 1, 0);
  int64_t keys = 0;
  for (size_t i = 0; i < n; ++i) {
    const AttentionRow& r = rows[i];
    check(r.n_keys >= 0 && r.n_keys <= r.capacity,
          "attention_rows: row {} sees {} keys of a cache of {}", i, r.n_keys, r.capacity);
    AttnArgs& a = args[i];
    a = AttnArgs{r.q,     n_heads,   head_dim,   r.k_cache,  r.v_cache, nullptr,
                 nullptr, r.kv_type, n_kv_heads, r.capacity, scale,     r.out};
    if (r.kv_type == DType::Q8) {
      const KvLayout lay{r.kv_type, n_kv_heads, head_dim, r.capacity};
      a.k_scale = lay.scales(r.k_cache);
      a.v_scale = lay.scales(r.v_cache);
    }
    if (r.n_keys > 0) plans[i] = plan(a, r.n_keys, pool.size());
    first[i + 1] = first[i] + plans[i].tasks;
    offset[i + 1] = offset[i] + plans[i].tasks * plans[i].stride;
    keys += r.n_keys;
  }
  if (sc.parts.size() < size_t(offset[n])) sc.parts.resize(size_t(offset[n]));
  float* base = sc.parts.data();
  const KernelTable& t = active_kernels();
  auto task = [&](int64_t k) {
    const size_t i = size_t(std::upper_bound(first.begin(), first.end(), k) - first.begin()) - 1;
    run_task(t, args[i], plans[i], rows[i].n_keys, k - first[i], base + offset[i]);
  };
  if (first[n] <= 1 || keys * n_kv_heads <= kSerialKeys) {
    for (int64_t k = 0; k < first[n]; ++k) task(k);
  } else {
    pool.parallel_for(first[n], task);
  }
  for (size_t i = 0; i < n; ++i) {
    if (rows[i].n_keys > 0)
      merge(args[i], plans[i], base + offset[i]);
    else
      std::fill(rows[i].out, rows[i].out + int64_t(n_heads) * head_dim, 0.f);
  }
}

}  // namespace edgevl::cpu
