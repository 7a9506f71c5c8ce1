#include "runtime/constraints/json_constraint.h"

#include <algorithm>
#include <functional>

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

namespace {

using Frag = ByteNfa::Frag;

class Builder {
 public:
  explicit Builder(ByteNfa& n) : n_(n) {}

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
  void eps(int32_t a, int32_t b) { n_.eps(a, b); }
  void edge(int32_t a, ByteRange r, int32_t b) { n_.edge(a, r, b); }
  Frag lit(std::string_view bytes) { return n_.lit(bytes); }
  Frag seq(Frag a, Frag b) { return n_.seq(a, b); }
  Frag alt(const std::vector<Frag>& fs) { return n_.alt(fs); }
  Frag opt(Frag f) { return n_.opt(f); }
  Frag repeat(const std::function<Frag()>& make, int32_t min, int32_t max) {
    return n_.repeat(make, min, max);
  }

  Frag space_opt() { return opt(lit(" ")); }
  Frag sep() { return seq(lit(","), space_opt()); }

  // One character of a JSON string: an unescaped UTF-8 character or an escape.
  Frag character() {
    const int32_t in = add(), out = add();
    // No '"', '\\' or raw control characters; valid UTF-8 for the rest.
    n_.code_points(in, out, {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}});
    const int32_t esc = add();
    edge(in, {'\\', '\\'}, esc);
    for (const char c : std::string_view("\"\\/bfnrt")) edge(esc, {uint8_t(c), uint8_t(c)}, out);
    const int32_t u = add();
    edge(esc, {'u', 'u'}, u);
    const std::vector<ByteRange> hex{{'0', '9'}, {'a', 'f'}, {'A', 'F'}};
    // \uXXXX outside D800-DFFF: a lone surrogate is rejected by strict parsers, and a pair
    // would need two escapes that agree (not worth the states).
    n_.path(u, out, {{{'0', '9'}, {'a', 'c'}, {'A', 'C'}, {'e', 'f'}, {'E', 'F'}}, hex, hex, hex});
    n_.path(u, out, {{{'d', 'd'}, {'D', 'D'}}, {{'0', '7'}}, hex, hex});
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

  ByteNfa& n_;
};

}  // namespace

ByteDfa compile_json_schema(const JsonSchema& schema, int32_t max_states) {
  // Bounds multiply (maxItems of strings with maxLength ...): refuse before memory runs out.
  ByteNfa nfa(size_t(max_states) * 8, "json schema",
              "simplify the schema (fewer or smaller bounded lengths and counts, shallower "
              "nesting)");
  const Frag root = Builder(nfa).build(schema);
  return nfa_to_dfa(nfa, root, max_states, "json schema");
}

}  // namespace edgevl
