#include "runtime/constraints/byte_nfa.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "core/error.h"

namespace edgevl {

int32_t ByteDfa::walk(int32_t s, std::string_view bytes) const {
  for (const char c : bytes) {
    if (s == 0) return 0;
    s = step(s, uint8_t(c));
  }
  return s;
}

bool ByteDfa::matches(std::string_view doc) const {
  const int32_t s = walk(start, doc);
  return s != 0 && accepting[size_t(s)] != 0;
}

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

// Appends the sequences of [lo, hi], a range that holds no surrogate.
void utf8_split(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>* out) {
  // One encoded length at a time.
  for (const uint32_t b : {0x7Fu, 0x7FFu, 0xFFFFu})
    if (lo <= b && hi > b) {
      utf8_split(lo, b, out);
      utf8_split(b + 1, hi, out);
      return;
    }
  if (hi <= 0x7F) {
    out->push_back({{uint8_t(lo), uint8_t(hi)}});
    return;
  }
  // Split until, for each count i of trailing continuation bytes, lo and hi either agree above
  // them or span all of them: then the encodings are exactly the product of per-byte ranges.
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      utf8_split(lo, lo | m, out);
      utf8_split((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      utf8_split(lo, (hi & ~m) - 1, out);
      utf8_split(hi & ~m, hi, out);
      return;
    }
  }
  const std::string a = utf8_encode(lo), b = utf8_encode(hi);
  std::vector<ByteRange> seq;
  for (size_t k = 0; k < a.size(); ++k) seq.push_back({uint8_t(a[k]), uint8_t(b[k])});
  out->push_back(std::move(seq));
}

}  // namespace

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

CodePointRanges normalize_code_points(CodePointRanges ranges) {
  CodePointRanges clipped;
  for (auto [lo, hi] : ranges) {
    hi = std::min(hi, kMaxCodePoint);
    if (lo > hi) continue;
    if (lo < kSurrogateLo && hi > kSurrogateHi) {
      clipped.emplace_back(lo, kSurrogateLo - 1);
      clipped.emplace_back(kSurrogateHi + 1, hi);
    } else if (hi < kSurrogateLo || lo > kSurrogateHi) {
      clipped.emplace_back(lo, hi);
    } else if (lo < kSurrogateLo) {
      clipped.emplace_back(lo, kSurrogateLo - 1);
    } else if (hi > kSurrogateHi) {
      clipped.emplace_back(kSurrogateHi + 1, hi);
    }
  }
  std::sort(clipped.begin(), clipped.end());
  CodePointRanges out;
  for (const auto& r : clipped) {
    if (!out.empty() && r.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  return out;
}

CodePointRanges complement_code_points(const CodePointRanges& ranges) {
  CodePointRanges out;
  uint32_t next = 0;  // the first code point not yet covered
  for (const auto& [lo, hi] : normalize_code_points(ranges)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return normalize_code_points(std::move(out));  // takes the surrogates out again
}

std::vector<std::vector<ByteRange>> utf8_sequences(const CodePointRanges& ranges) {
  std::vector<std::vector<ByteRange>> out;
  for (const auto& [lo, hi] : normalize_code_points(ranges)) utf8_split(lo, hi, &out);
  return out;
}

ByteNfa::ByteNfa(size_t max_states, std::string what, std::string hint)
    : limit_(max_states), what_(std::move(what)), hint_(std::move(hint)) {}

int32_t ByteNfa::add() {
  check(edges_.size() < limit_, "{}: the automaton exceeds {} NFA states; {}", what_, limit_,
        hint_);
  edges_.emplace_back();
  eps_.emplace_back();
  return int32_t(edges_.size() - 1);
}

ByteNfa::Frag ByteNfa::empty() {
  const int32_t s = add();
  return {s, s};
}

ByteNfa::Frag ByteNfa::nothing() {
  return {add(), add()};
}

ByteNfa::Frag ByteNfa::lit(std::string_view bytes) {
  const int32_t in = add();
  int32_t cur = in;
  for (const char c : bytes) {
    const int32_t nx = add();
    edge(cur, {uint8_t(c), uint8_t(c)}, nx);
    cur = nx;
  }
  return {in, cur};
}

void ByteNfa::path(int32_t a, int32_t b, const std::vector<std::vector<ByteRange>>& positions) {
  int32_t cur = a;
  for (size_t i = 0; i < positions.size(); ++i) {
    const int32_t nx = i + 1 == positions.size() ? b : add();
    for (const ByteRange r : positions[i]) edge(cur, r, nx);
    cur = nx;
  }
}

void ByteNfa::code_points(int32_t a, int32_t b, const CodePointRanges& ranges) {
  for (const auto& s : utf8_sequences(ranges)) {
    std::vector<std::vector<ByteRange>> positions;
    for (const ByteRange r : s) positions.push_back({r});
    path(a, b, positions);
  }
}

ByteNfa::Frag ByteNfa::code_points(const CodePointRanges& ranges) {
  const int32_t in = add(), out = add();
  code_points(in, out, ranges);
  return {in, out};
}

ByteNfa::Frag ByteNfa::seq(Frag a, Frag b) {
  eps(a.out, b.in);
  return {a.in, b.out};
}

ByteNfa::Frag ByteNfa::alt(const std::vector<Frag>& fs) {
  const int32_t in = add(), out = add();
  for (const Frag f : fs) {
    eps(in, f.in);
    eps(f.out, out);
  }
  return {in, out};
}

ByteNfa::Frag ByteNfa::opt(Frag f) {
  const int32_t in = add(), out = add();
  eps(in, f.in);
  eps(in, out);
  eps(f.out, out);
  return {in, out};
}

ByteNfa::Frag ByteNfa::repeat(const std::function<Frag()>& make, int32_t min, int32_t max) {
  Frag f = empty();
  for (int32_t i = 0; i < min; ++i) f = seq(f, make());
  if (max < 0) {
    const Frag g = make();
    const int32_t out = add();
    eps(f.out, g.in);
    eps(f.out, out);
    eps(g.out, g.in);
    eps(g.out, out);
    return {f.in, out};
  }
  const int32_t out = add();
  int32_t cur = f.out;
  for (int32_t i = min; i < max; ++i) {
    eps(cur, out);
    const Frag g = make();
    eps(cur, g.in);
    cur = g.out;
  }
  eps(cur, out);
  return {f.in, out};
}

ByteDfa nfa_to_dfa(const ByteNfa& nfa, ByteNfa::Frag root, int32_t max_states,
                   std::string_view what) {
  const size_t n = nfa.size();

  // Byte classes: the intervals between all range boundaries.
  std::array<bool, 257> cut{};
  cut[0] = cut[256] = true;
  for (size_t s = 0; s < n; ++s)
    for (const auto& e : nfa.edges(int32_t(s))) cut[e.lo] = cut[size_t(e.hi) + 1] = true;
  ByteDfa d;
  d.nfa_states = int64_t(n);
  int32_t cls = -1;
  for (int b = 0; b < 256; ++b) {
    if (cut[size_t(b)]) ++cls;
    d.byte_class[size_t(b)] = uint8_t(cls);
  }
  d.num_classes = cls + 1;
  const auto nc = size_t(d.num_classes);

  // Every DFA state costs its set's size (stored twice) and a scan of its members' edges: a
  // state count within bounds can still hide closures of most of a large NFA each.
  const int64_t work_limit = int64_t(max_states) * 256;
  int64_t work = 0;
  auto spend = [&](size_t units) {
    work += int64_t(units);
    check(work <= work_limit,
          "{}: the automaton's construction exceeds its work bound ({} set members for at "
          "most {} states); {}",
          what, work_limit, max_states, nfa.hint());
  };

  std::vector<uint32_t> seen(n, 0);
  uint32_t mark = 0;
  auto closure = [&](std::vector<int32_t>& set) {
    ++mark;
    std::vector<int32_t> stack;
    for (const int32_t s : set) seen[size_t(s)] = mark;
    stack = set;
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      const auto& es = nfa.eps_edges(s);
      spend(es.size() + 1);
      for (const int32_t t : es)
        if (seen[size_t(t)] != mark) {
          seen[size_t(t)] = mark;
          set.push_back(t);
          stack.push_back(t);
        }
    }
    std::sort(set.begin(), set.end());
  };

  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> sets;
  auto intern = [&](std::vector<int32_t> set) {
    if (set.empty()) return int32_t(0);
    const auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    const auto id = int32_t(sets.size());
    check(id < max_states, "{}: the automaton exceeds {} states; {}", what, max_states, nfa.hint());
    spend(set.size());
    ids.emplace(set, id);
    sets.push_back(std::move(set));
    return id;
  };
  sets.emplace_back();  // 0: dead
  std::vector<int32_t> start{root.in};
  closure(start);
  d.start = intern(std::move(start));
  std::vector<std::vector<int32_t>> buckets(nc);
  for (size_t s = 0; s < sets.size(); ++s) {  // grows while it runs
    for (auto& b : buckets) b.clear();
    for (const int32_t q : sets[s]) {
      const auto& es = nfa.edges(q);
      spend(es.size());
      for (const auto& e : es)
        for (size_t c = d.byte_class[e.lo]; c <= d.byte_class[e.hi]; ++c)
          buckets[c].push_back(e.to);
    }
    d.next.resize(sets.size() * nc, 0);
    for (size_t c = 0; c < nc; ++c) {
      if (buckets[c].empty()) continue;
      std::vector<int32_t> t = buckets[c];
      std::sort(t.begin(), t.end());
      t.erase(std::unique(t.begin(), t.end()), t.end());
      closure(t);
      const int32_t id = intern(std::move(t));
      d.next.resize(sets.size() * nc, 0);
      d.next[s * nc + c] = id;
    }
  }
  d.num_states = int32_t(sets.size());
  d.next.resize(sets.size() * nc, 0);
  d.accepting.assign(sets.size(), 0);
  for (size_t s = 1; s < sets.size(); ++s)
    d.accepting[s] = std::binary_search(sets[s].begin(), sets[s].end(), root.out) ? 1 : 0;
  return d;
}

}  // namespace edgevl
