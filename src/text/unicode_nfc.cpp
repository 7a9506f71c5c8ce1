// NFC = canonical decomposition, canonical reordering of combining marks, then canonical
// composition (UAX #15). Hangul syllables are handled arithmetically.
#include "text/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <unordered_map>
#include <vector>

#include "text/tokenizer_impl.h"

namespace edgevl::text {
namespace {

#include "text/unicode_nfc_tables.inc"

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;
constexpr uint32_t kComposes = 0x80000000u;

uint8_t combining_class(uint32_t cp) {
  if (cp < 0x300) return 0;
  auto it = std::lower_bound(std::begin(kCombiningClass), std::end(kCombiningClass), cp,
                             [](const uint32_t(&e)[2], uint32_t v) { return e[0] < v; });
  return it != std::end(kCombiningClass) && (*it)[0] == cp ? uint8_t((*it)[1]) : 0;
}

const uint32_t* decomposition(uint32_t cp) {
  auto it = std::lower_bound(std::begin(kDecomposition), std::end(kDecomposition), cp,
                             [](const uint32_t(&e)[3], uint32_t v) { return e[0] < v; });
  return it != std::end(kDecomposition) && (*it)[0] == cp ? *it : nullptr;
}

// (first << 32 | second) -> composite, for pairs that compose under NFC. Built once, then
// only read.
const std::unordered_map<uint64_t, uint32_t>& compositions() {
  static const std::unordered_map<uint64_t, uint32_t> table = [] {
    std::unordered_map<uint64_t, uint32_t> m;
    for (const auto& e : kDecomposition)
      if (e[2] & kComposes) m.emplace((uint64_t(e[1]) << 32) | (e[2] & ~kComposes), e[0]);
    return m;
  }();
  return table;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  const uint32_t* d = cp >= 0xC0 ? decomposition(cp) : nullptr;
  if (!d) {
    out.push_back(cp);
    return;
  }
  decompose(d[1], out);
  const uint32_t b = d[2] & ~kComposes;
  if (b) decompose(b, out);
}

uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto& m = compositions();
  auto it = m.find((uint64_t(a) << 32) | b);
  return it == m.end() ? 0 : it->second;
}

void put_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

bool nfc_trivially_stable(std::string_view s) {
  // Lead bytes below 0xCC encode code points below U+0300, none of which change under NFC.
  for (char c : s)
    if (uint8_t(c) >= 0xCC) return false;
  return true;
}

std::string nfc_normalize(std::string_view s) {
  if (nfc_trivially_stable(s)) return std::string(s);
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_valid_len(s, i);
    if (n == 0) return std::string(s);
    uint32_t cp = uint8_t(s[i]) & (n == 1 ? 0x7F : (0x7F >> n));
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
    decompose(cp, cps);
    i += n;
  }
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j, [](uint32_t a, uint32_t b) {
      return combining_class(a) < combining_class(b);
    });
    i = j;
  }
  // Canonical composition: each character joins the last starter unless blocked by a mark
  // of the same or higher class in between.
  std::vector<uint32_t> out;
  out.reserve(cps.size());
  int64_t starter = -1;
  int last_ccc = -1;
  for (uint32_t cp : cps) {
    const int ccc = combining_class(cp);
    if (starter >= 0) {
      const bool blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= ccc);
      if (!blocked) {
        if (uint32_t c = compose_pair(out[starter], cp)) {
          out[starter] = c;
          continue;
        }
      }
    }
    if (ccc == 0) {
      starter = int64_t(out.size());
      last_ccc = -1;
    } else {
      last_ccc = ccc;
    }
    out.push_back(cp);
  }
  std::string res;
  res.reserve(s.size());
  for (uint32_t cp : out) put_utf8(cp, res);
  return res;
}

}  // namespace edgevl::text
