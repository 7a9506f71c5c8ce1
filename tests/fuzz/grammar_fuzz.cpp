// libFuzzer entry for GBNF grammars (untrusted text from --grammar): any input must either
// compile to a consistent DFA or throw edgevl::Error - never crash, hang or allocate without
// bound (the small automaton limits keep each run cheap; the same limits scale to the
// defaults). The first byte picks the target: odd checks the code-point-class to UTF-8
// conversion against utf8_encode over the class's edges.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "runtime/constraints/byte_nfa.h"
#include "runtime/constraints/grammar_constraint.h"

namespace {

using edgevl::ByteDfa;

void check_dfa(const ByteDfa& d) {
  if (d.num_states < 2 || d.start <= 0 || d.start >= d.num_states) std::abort();
  if (d.next.size() != size_t(d.num_states) * size_t(d.num_classes)) std::abort();
  if (d.accepting.size() != size_t(d.num_states) || d.accepting[0]) std::abort();
  for (const int32_t t : d.next)
    if (t < 0 || t >= d.num_states) std::abort();
  for (int c = 0; c < d.num_classes; ++c)
    if (d.next[size_t(c)] != 0) std::abort();  // the dead state stays dead
  // A shortest accepted text (BFS over one byte per class) must match.
  std::vector<int32_t> prev(size_t(d.num_states), -1);
  std::vector<uint8_t> via(size_t(d.num_states), 0);
  std::vector<uint8_t> rep(size_t(d.num_classes), 0);
  for (int b = 255; b >= 0; --b) rep[d.byte_class[size_t(b)]] = uint8_t(b);
  std::deque<int32_t> q{d.start};
  prev[size_t(d.start)] = d.start;
  int32_t found = -1;
  while (!q.empty() && found < 0) {
    const int32_t s = q.front();
    q.pop_front();
    if (d.accepting[size_t(s)]) found = s;
    for (int c = 0; c < d.num_classes && found < 0; ++c) {
      const int32_t t = d.next[size_t(s) * size_t(d.num_classes) + size_t(c)];
      if (t == 0 || prev[size_t(t)] >= 0) continue;
      prev[size_t(t)] = s;
      via[size_t(t)] = rep[size_t(c)];
      q.push_back(t);
    }
  }
  if (found < 0) std::abort();  // compile_grammar refuses an empty language
  std::string text;
  for (int32_t s = found; s != d.start; s = prev[size_t(s)]) text += char(via[size_t(s)]);
  std::reverse(text.begin(), text.end());
  if (!d.matches(text)) std::abort();
}

bool in_class(const edgevl::CodePointRanges& rs, uint32_t cp) {
  if (cp >= 0xD800 && cp <= 0xDFFF) return false;
  for (const auto& [lo, hi] : rs)
    if (cp >= lo && cp <= hi) return true;
  return false;
}

void check_class(const uint8_t* data, size_t size) {
  edgevl::CodePointRanges rs;
  for (size_t i = 0; i + 6 <= size && rs.size() < 16; i += 6) {
    uint32_t a = 0, b = 0;
    std::memcpy(&a, data + i, 3);
    std::memcpy(&b, data + i + 3, 3);
    a %= 0x110000;
    b %= 0x110000;
    rs.emplace_back(std::min(a, b), std::max(a, b));
  }
  const bool negate = size > 0 && (data[0] & 2);
  const edgevl::CodePointRanges cls = negate ? edgevl::complement_code_points(rs) : rs;
  edgevl::ByteNfa nfa(1 << 16, "fuzz", "");
  const auto f = nfa.code_points(cls);
  const ByteDfa d = edgevl::nfa_to_dfa(nfa, f, 1 << 14, "fuzz");
  std::vector<uint32_t> probes{0,      0x7F,   0x80,   0x7FF,   0x800,
                               0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};
  for (const auto& [lo, hi] : rs)
    for (const uint32_t cp : {lo, hi, lo - 1, hi + 1, lo + (hi - lo) / 2})
      if (cp <= 0x10FFFF) probes.push_back(cp);
  for (const uint32_t cp : probes) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const bool want = negate ? !in_class(rs, cp) : in_class(rs, cp);
    if (d.matches(edgevl::utf8_encode(cp)) != want) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] & 1) {
    check_class(data + 1, size - 1);
    return 0;
  }
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    check_dfa(edgevl::compile_grammar(text, 2000, 2));
  } catch (const edgevl::Error&) {
  }
  return 0;
}
