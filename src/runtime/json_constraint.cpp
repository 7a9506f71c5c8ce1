#include "runtime/json_constraint.h"

#include <algorithm>
#include <functional>
#include <map>

#include "core/error.h"

namespace edgevl {

std::string json_quote(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = uint8_t(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

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

struct Range {
  uint8_t lo, hi;
};

// An epsilon-NFA over bytes, built from fragments with one entry and one exit state.
struct Nfa {
  struct Edge {
    uint8_t lo, hi;
    int32_t to;
  };
  std::vector<std::vector<Edge>> edges;
  std::vector<std::vector<int32_t>> eps;
  size_t limit = 0;
  int32_t add() {
    // Bounds multiply (maxItems of strings with maxLength ...): refuse before memory runs out.
    check(edges.size() < limit,
          "json schema: the automaton exceeds {} NFA states; simplify the schema (fewer or "
          "smaller bounded lengths and counts, shallower nesting)",
          limit);
    edges.emplace_back();
    eps.emplace_back();
    return int32_t(edges.size() - 1);
  }
};

struct Frag {
  int32_t in, out;
};

class Builder {
 public:
  explicit Builder(Nfa& n) : n_(n) {}

  Frag build(const JsonSchema& s) {
    using T = JsonSchema::Type;
    switch (s.type) {
      case T::Any: return any(s.any_depth);
      case T::Object: return s.props.empty() ? any_object(s.any_depth) : object(s);
      case T::Array: {
        check(s.min_items >= 0 && (s.max_items < 0 || s.max_items >= s.min_items),
              "json schema: array needs 0 <= minItems <= maxItems (got {}..{})", s.min_items,
              s.max_items);
        auto item = [&] { return s.items.empty() ? any(s.any_depth) : build(s.items[0]); };
        return array(item, s.min_items, s.max_items);
      }
      case T::String:
        check(s.min_length >= 0 && (s.max_length < 0 || s.max_length >= s.min_length),
              "json schema: string needs 0 <= minLength <= maxLength (got {}..{})", s.min_length,
              s.max_length);
        return string(s.min_length, s.max_length);
      case T::Number: return number(true);
      case T::Integer: return number(false);
      case T::Boolean: return alt({lit("true"), lit("false")});
      case T::Null: return lit("null");
      case T::Enum: {
        check(!s.literals.empty(), "json schema: enum without values");
        std::vector<Frag> fs;
        for (const auto& l : s.literals) fs.push_back(lit(l));
        return alt(fs);
      }
      case T::AnyOf: {
        check(!s.alternatives.empty(), "json schema: anyOf without alternatives");
        std::vector<Frag> fs;
        for (const auto& a : s.alternatives) fs.push_back(build(a));
        return alt(fs);
      }
    }
    throw Error("internal: unknown json schema type");
  }

 private:
  int32_t add() { return n_.add(); }
  void eps(int32_t a, int32_t b) { n_.eps[size_t(a)].push_back(b); }
  void edge(int32_t a, Range r, int32_t b) { n_.edges[size_t(a)].push_back({r.lo, r.hi, b}); }

  Frag empty() {
    const int32_t s = add();
    return {s, s};
  }
  Frag lit(std::string_view bytes) {
    const int32_t in = add();
    int32_t cur = in;
    for (const char c : bytes) {
      const int32_t nx = add();
      edge(cur, {uint8_t(c), uint8_t(c)}, nx);
      cur = nx;
    }
    return {in, cur};
  }
  // From `a` to `b` through one byte per position, each within one of its ranges.
  void path(int32_t a, int32_t b, const std::vector<std::vector<Range>>& positions) {
    int32_t cur = a;
    for (size_t i = 0; i < positions.size(); ++i) {
      const int32_t nx = i + 1 == positions.size() ? b : add();
      for (const Range r : positions[i]) edge(cur, r, nx);
      cur = nx;
    }
  }
  Frag seq(Frag a, Frag b) {
    eps(a.out, b.in);
    return {a.in, b.out};
  }
  Frag alt(const std::vector<Frag>& fs) {
    const int32_t in = add(), out = add();
    for (const Frag f : fs) {
      eps(in, f.in);
      eps(f.out, out);
    }
    return {in, out};
  }
  Frag opt(Frag f) {
    const int32_t in = add(), out = add();
    eps(in, f.in);
    eps(in, out);
    eps(f.out, out);
    return {in, out};
  }
  // min..max copies of make() in a row (max -1: unbounded). Every copy is a fresh fragment:
  // an NFA has no return stack, so a repeated sub-language is repeated states.
  Frag repeat(const std::function<Frag()>& make, int32_t min, int32_t max) {
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
  Frag space_opt() { return opt(lit(" ")); }
  Frag sep() { return seq(lit(","), space_opt()); }

  // One character of a JSON string: an unescaped UTF-8 character or an escape.
  Frag character() {
    const int32_t in = add(), out = add();
    const Range cont{0x80, 0xBF};
    path(in, out, {{{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7F}}});
    path(in, out, {{{0xC2, 0xDF}}, {cont}});
    path(in, out, {{{0xE0, 0xE0}}, {{0xA0, 0xBF}}, {cont}});
    path(in, out, {{{0xE1, 0xEC}, {0xEE, 0xEF}}, {cont}, {cont}});
    path(in, out, {{{0xED, 0xED}}, {{0x80, 0x9F}}, {cont}});  // no surrogates
    path(in, out, {{{0xF0, 0xF0}}, {{0x90, 0xBF}}, {cont}, {cont}});
    path(in, out, {{{0xF1, 0xF3}}, {cont}, {cont}, {cont}});
    path(in, out, {{{0xF4, 0xF4}}, {{0x80, 0x8F}}, {cont}, {cont}});
    const int32_t esc = add();
    edge(in, {'\\', '\\'}, esc);
    for (const char c : std::string_view("\"\\/bfnrt")) edge(esc, {uint8_t(c), uint8_t(c)}, out);
    const int32_t u = add();
    edge(esc, {'u', 'u'}, u);
    const std::vector<Range> hex{{'0', '9'}, {'a', 'f'}, {'A', 'F'}};
    // \uXXXX outside D800-DFFF: a lone surrogate is rejected by strict parsers, and a pair
    // would need two escapes that agree (not worth the states).
    path(u, out, {{{'0', '9'}, {'a', 'c'}, {'A', 'C'}, {'e', 'f'}, {'E', 'F'}}, hex, hex, hex});
    path(u, out, {{{'d', 'd'}, {'D', 'D'}}, {{'0', '7'}}, hex, hex});
    return {in, out};
  }
  Frag string(int32_t min, int32_t max) {
    return seq(seq(lit("\""), repeat([&] { return character(); }, min, max)), lit("\""));
  }
  Frag digits(int32_t min, int32_t max) {
    return repeat(
        [&] {
          const int32_t in = add(), out = add();
          edge(in, {'0', '9'}, out);
          return Frag{in, out};
        },
        min, max);
  }
  Frag number(bool fraction) {
    const int32_t nz_in = add(), nz_out = add();
    edge(nz_in, {'1', '9'}, nz_out);
    Frag f = seq(opt(lit("-")), alt({lit("0"), seq(Frag{nz_in, nz_out}, digits(0, 14))}));
    if (!fraction) return f;
    f = seq(f, opt(seq(lit("."), digits(1, 15))));
    const int32_t e_in = add(), e_out = add();
    edge(e_in, {'e', 'e'}, e_out);
    edge(e_in, {'E', 'E'}, e_out);
    const int32_t s_in = add(), s_out = add();
    edge(s_in, {'+', '+'}, s_out);
    edge(s_in, {'-', '-'}, s_out);
    return seq(f, opt(seq(seq(Frag{e_in, e_out}, opt(Frag{s_in, s_out})), digits(1, 2))));
  }
  Frag array(const std::function<Frag()>& item, int32_t min, int32_t max) {
    if (max == 0) return lit("[]");
    const Frag list = seq(item(), repeat([&] { return seq(sep(), item()); }, std::max(min, 1) - 1,
                                         max < 0 ? -1 : max - 1));
    return seq(seq(lit("["), min == 0 ? opt(list) : list), lit("]"));
  }
  // Any value with containers nested at most `depth` levels below this one.
  Frag any(int32_t depth) {
    std::vector<Frag> fs{string(0, -1), number(true), alt({lit("true"), lit("false")}),
                         lit("null")};
    if (depth > 0) {
      fs.push_back(any_object(depth - 1));
      fs.push_back(array([&] { return any(depth - 1); }, 0, -1));
    }
    return alt(fs);
  }
  Frag any_object(int32_t depth) {
    auto member = [&] { return seq(seq(seq(string(0, -1), lit(":")), space_opt()), any(depth)); };
    const Frag list = seq(member(), repeat([&] { return seq(sep(), member()); }, 0, -1));
    return seq(seq(lit("{"), opt(list)), lit("}"));
  }
  // Declared order; a pair of states per position ("nothing written yet" / "something
  // written") decides whether the next member needs a comma.
  Frag object(const JsonSchema& s) {
    check(s.names.size() == s.props.size() && s.required.size() == s.props.size(),
          "internal: object schema with {} names, {} schemas, {} required flags", s.names.size(),
          s.props.size(), s.required.size());
    const Frag open = lit("{");
    int32_t none = open.out, some = -1;
    for (size_t i = 0; i < s.props.size(); ++i) {
      auto member = [&] {
        return seq(seq(lit(json_quote(s.names[i]) + ":"), space_opt()), build(s.props[i]));
      };
      const int32_t next_none = add(), next_some = add();
      if (none >= 0) {
        if (!s.required[i]) eps(none, next_none);
        const Frag m = member();
        eps(none, m.in);
        eps(m.out, next_some);
      }
      if (some >= 0) {
        if (!s.required[i]) eps(some, next_some);
        const Frag m = seq(sep(), member());
        eps(some, m.in);
        eps(m.out, next_some);
      }
      none = none >= 0 && !s.required[i] ? next_none : -1;
      some = next_some;
    }
    const Frag close = lit("}");
    if (none >= 0) eps(none, close.in);
    eps(some, close.in);
    return {open.in, close.out};
  }

  Nfa& n_;
};

}  // namespace

ByteDfa compile_json_schema(const JsonSchema& schema, int32_t max_states) {
  Nfa nfa;
  nfa.limit = size_t(max_states) * 8;
  const Frag root = Builder(nfa).build(schema);
  const size_t n = nfa.edges.size();

  // Byte classes: the intervals between all range boundaries.
  std::array<bool, 257> cut{};
  cut[0] = cut[256] = true;
  for (const auto& es : nfa.edges)
    for (const auto& e : es) cut[e.lo] = cut[size_t(e.hi) + 1] = true;
  ByteDfa d;
  d.nfa_states = int64_t(n);
  int32_t cls = -1;
  for (int b = 0; b < 256; ++b) {
    if (cut[size_t(b)]) ++cls;
    d.byte_class[size_t(b)] = uint8_t(cls);
  }
  d.num_classes = cls + 1;
  const auto nc = size_t(d.num_classes);

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
      for (const int32_t t : nfa.eps[size_t(s)])
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
    check(id < max_states,
          "json schema: the automaton exceeds {} states; simplify the schema "
          "(fewer or smaller bounded lengths, shallower nesting)",
          max_states);
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
    for (const int32_t q : sets[s])
      for (const auto& e : nfa.edges[size_t(q)])
        for (size_t c = d.byte_class[e.lo]; c <= d.byte_class[e.hi]; ++c)
          buckets[c].push_back(e.to);
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
