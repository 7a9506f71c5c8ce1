#include "runtime/constraints/grammar_constraint.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace edgevl {
namespace {

// Grammar text is untrusted: these bound the parser's and the builder's recursion (the stack),
// whatever the automaton limits allow.
constexpr int32_t kMaxExprHeight = 64;    // groups and postfix operators inside one another
constexpr int32_t kMaxBuildDepth = 2000;  // the same across rule references (a chain of rules)
constexpr int64_t kMaxRepeatBound = 1000000;

struct GrammarNode {
  enum class Kind { Seq, Alt, Bytes, Class, Ref, Repeat };
  Kind kind = Kind::Seq;
  std::string bytes;         // Bytes
  CodePointRanges ranges;    // Class, negation applied
  int32_t rule = -1;         // Ref
  int32_t min = 0, max = 0;  // Repeat (max -1: unbounded)
  int32_t height = 1;
  std::vector<GrammarNode> kids;
};

struct GrammarRule {
  std::string name;
  GrammarNode body;
  bool defined = false;
  size_t pos = 0;  // its definition, or its first reference while undefined
};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

class GrammarParser {
 public:
  explicit GrammarParser(std::string_view text) : t_(text) {}

  std::vector<GrammarRule> parse() {
    skip_space(true);
    while (p_ < t_.size()) {
      const size_t start = p_;
      if (!is_name_char(t_[p_])) fail_at(p_, "expected a rule name ([a-zA-Z0-9-]+)");
      const std::string name = parse_name();
      skip_space(false);
      if (t_.substr(p_, 3) != "::=") fail_at(p_, fmt::format("expected '::=' after '{}'", name));
      p_ += 3;
      skip_space(true);
      GrammarNode body = parse_alternates(false);
      if (p_ < t_.size() && t_[p_] != '\n' && t_[p_] != '\r') fail_at(p_, unexpected());
      skip_space(true);
      const int32_t id = rule_id(name, start);
      GrammarRule& r = rules_[size_t(id)];
      if (r.defined) {
        const auto [line, col] = line_col(r.pos);
        fail_at(start,
                fmt::format("rule '{}' is already defined at line {}, column {}", name, line, col));
      }
      r.defined = true;
      r.pos = start;
      r.body = std::move(body);
    }
    for (const GrammarRule& r : rules_)
      if (!r.defined) fail_at(r.pos, fmt::format("undefined rule '{}'", r.name));
    return std::move(rules_);
  }

  int32_t root() const {
    const auto it = ids_.find("root");
    return it == ids_.end() ? -1 : it->second;
  }

 private:
  std::pair<int32_t, int32_t> line_col(size_t pos) const {
    int32_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else if ((uint8_t(t_[i]) & 0xC0) != 0x80) {
        ++col;  // characters, not bytes
      }
    }
    return {line, col};
  }
  [[noreturn]] void fail_at(size_t pos, const std::string& msg) const {
    const auto [line, col] = line_col(pos);
    throw Error(fmt::format("grammar: line {}, column {}: {}", line, col, msg));
  }
  std::string unexpected() const {
    const auto c = uint8_t(t_[p_]);
    return c >= 0x20 && c < 0x7F ? fmt::format("unexpected '{}'", char(c))
                                 : fmt::format("unexpected byte 0x{:02X}", c);
  }

  // Blanks and comments; line ends too when `newlines`.
  void skip_space(bool newlines) {
    while (p_ < t_.size()) {
      const char c = t_[p_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++p_;
      } else if (c == '#') {
        while (p_ < t_.size() && t_[p_] != '\n' && t_[p_] != '\r') ++p_;
      } else {
        break;
      }
    }
  }
  // At a line end outside parentheses: whether the next line continues the rule (the input
  // goes on and the line does not start `name ::=`); if so, moves there.
  bool continues_on_next_line() {
    const size_t eol = p_;
    skip_space(true);
    size_t e = p_;
    while (e < t_.size() && is_name_char(t_[e])) ++e;
    const bool named = e > p_;
    while (e < t_.size() && (t_[e] == ' ' || t_[e] == '\t')) ++e;
    if (p_ < t_.size() && !(named && t_.substr(e, 3) == "::=")) return true;
    p_ = eol;
    return false;
  }

  std::string parse_name() {
    const size_t s = p_;
    while (p_ < t_.size() && is_name_char(t_[p_])) ++p_;
    return std::string(t_.substr(s, p_ - s));
  }
  int32_t rule_id(const std::string& name, size_t pos) {
    const auto [it, added] = ids_.emplace(name, int32_t(rules_.size()));
    if (added) rules_.push_back(GrammarRule{name, {}, false, pos});
    return it->second;
  }

  GrammarNode parse_alternates(bool nested) {
    std::vector<GrammarNode> alts;
    alts.push_back(parse_sequence(nested));
    while (p_ < t_.size() && t_[p_] == '|') {
      ++p_;
      skip_space(true);
      alts.push_back(parse_sequence(nested));
    }
    if (alts.size() == 1) return std::move(alts[0]);
    return wrap(GrammarNode::Kind::Alt, std::move(alts));
  }

  GrammarNode parse_sequence(bool nested) {
    std::vector<GrammarNode> items;
    while (p_ < t_.size()) {
      const char c = t_[p_];
      if (c == '\n' || c == '\r') {
        if (!continues_on_next_line()) break;
        continue;
      }
      const size_t at = p_;
      if (c == '"') {
        items.push_back(parse_literal());
      } else if (c == '[') {
        items.push_back(parse_class());
      } else if (c == '.') {
        ++p_;
        GrammarNode n;
        n.kind = GrammarNode::Kind::Class;
        n.ranges = complement_code_points({});
        items.push_back(std::move(n));
      } else if (is_name_char(c)) {
        GrammarNode n;
        n.kind = GrammarNode::Kind::Ref;
        n.rule = rule_id(parse_name(), at);
        items.push_back(std::move(n));
      } else if (c == '(') {
        if (++groups_ > kMaxExprHeight)
          fail_at(at, fmt::format("groups nest deeper than {}", kMaxExprHeight));
        ++p_;
        skip_space(true);
        GrammarNode g = parse_alternates(true);
        if (p_ >= t_.size()) fail_at(at, "'(' is never closed");
        if (t_[p_] != ')') fail_at(p_, "expected ')', " + unexpected());
        ++p_;
        --groups_;
        items.push_back(std::move(g));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (items.empty()) fail_at(at, fmt::format("'{}' has no item before it to repeat", c));
        auto [min, max] = parse_postfix();
        if (items.back().height + 1 > kMaxExprHeight)
          fail_at(at, fmt::format("groups and repetitions nest deeper than {}", kMaxExprHeight));
        std::vector<GrammarNode> kid;
        kid.push_back(std::move(items.back()));
        GrammarNode r = wrap(GrammarNode::Kind::Repeat, std::move(kid));
        r.min = min;
        r.max = max;
        items.back() = std::move(r);
      } else {
        break;
      }
      skip_space(nested);
    }
    return wrap(GrammarNode::Kind::Seq, std::move(items));
  }

  static GrammarNode wrap(GrammarNode::Kind kind, std::vector<GrammarNode> kids) {
    GrammarNode n;
    n.kind = kind;
    for (const auto& k : kids) n.height = std::max(n.height, k.height + 1);
    n.kids = std::move(kids);
    return n;
  }

  std::pair<int32_t, int32_t> parse_postfix() {
    const char c = t_[p_++];
    if (c == '*') return {0, -1};
    if (c == '+') return {1, -1};
    if (c == '?') return {0, 1};
    skip_space(false);
    const int32_t min = parse_count();
    int32_t max = min;
    skip_space(false);
    if (p_ < t_.size() && t_[p_] == ',') {
      ++p_;
      skip_space(false);
      max = p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9' ? parse_count() : -1;
      skip_space(false);
    }
    if (p_ >= t_.size() || t_[p_] != '}') fail_at(p_, "expected '}' to end the repetition");
    ++p_;
    if (max >= 0 && max < min)
      fail_at(p_ - 1,
              fmt::format("repetition {{{},{}}}: the maximum is below the minimum", min, max));
    return {min, max};
  }
  int32_t parse_count() {
    if (p_ >= t_.size() || t_[p_] < '0' || t_[p_] > '9') fail_at(p_, "expected a number");
    const size_t s = p_;
    int64_t v = 0;
    while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') {
      v = v * 10 + (t_[p_++] - '0');
      if (v > kMaxRepeatBound)
        fail_at(s, fmt::format("repetition count above {}", kMaxRepeatBound));
    }
    return int32_t(v);
  }

  // One code point: an escape or a UTF-8 character of the text.
  uint32_t parse_char() {
    const size_t at = p_;
    const auto b0 = uint8_t(t_[p_]);
    if (b0 == '\\') {
      if (++p_ >= t_.size()) fail_at(at, "'\\' at the end of the input");
      const char e = t_[p_++];
      switch (e) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case '\\':
        case '"':
        case '[':
        case ']': return uint8_t(e);
        case 'x': return parse_hex(at, 2);
        case 'u': return parse_hex(at, 4);
        case 'U': return parse_hex(at, 8);
        default: fail_at(at, fmt::format("unknown escape '\\{}'", e >= 0x20 && e < 0x7F ? e : '?'));
      }
    }
    const int len = b0 < 0x80                 ? 1
                    : b0 >= 0xC2 && b0 < 0xE0 ? 2
                    : b0 >= 0xE0 && b0 < 0xF0 ? 3
                    : b0 >= 0xF0 && b0 < 0xF5 ? 4
                                              : 0;
    if (len == 0 || p_ + size_t(len) > t_.size()) fail_at(at, "invalid UTF-8");
    uint32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto b = uint8_t(t_[p_ + size_t(i)]);
      if ((b & 0xC0) != 0x80) fail_at(at, "invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMinOfLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinOfLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      fail_at(at, "invalid UTF-8");
    p_ += size_t(len);
    return cp;
  }
  uint32_t parse_hex(size_t at, int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++p_) {
      const char c = p_ < t_.size() ? t_[p_] : 0;
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) fail_at(at, fmt::format("the escape needs {} hex digits", digits));
      v = v * 16 + uint32_t(d);
    }
    if (v > 0x10FFFF) fail_at(at, fmt::format("U+{:X} is above U+10FFFF", v));
    return v;
  }

  GrammarNode parse_literal() {
    const size_t at = p_++;
    GrammarNode n;
    n.kind = GrammarNode::Kind::Bytes;
    while (true) {
      if (p_ >= t_.size()) fail_at(at, "the string literal is never closed");
      if (t_[p_] == '"') break;
      const size_t c_at = p_;
      const uint32_t cp = parse_char();
      if (cp >= 0xD800 && cp <= 0xDFFF)
        fail_at(c_at, fmt::format("U+{:X} is a surrogate, not a character", cp));
      n.bytes += utf8_encode(cp);
    }
    ++p_;
    return n;
  }

  GrammarNode parse_class() {
    const size_t at = p_++;
    const bool negated = p_ < t_.size() && t_[p_] == '^';
    if (negated) ++p_;
    CodePointRanges ranges;
    while (true) {
      if (p_ >= t_.size()) fail_at(at, "the character class is never closed");
      if (t_[p_] == ']') break;
      const size_t lo_at = p_;
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (p_ + 1 < t_.size() && t_[p_] == '-' && t_[p_ + 1] != ']') {
        ++p_;
        hi = parse_char();
        if (hi < lo) fail_at(lo_at, fmt::format("the range U+{:X}-U+{:X} is reversed", lo, hi));
      }
      ranges.emplace_back(lo, hi);
    }
    ++p_;
    GrammarNode n;
    n.kind = GrammarNode::Kind::Class;
    n.ranges = negated ? complement_code_points(ranges) : normalize_code_points(ranges);
    return n;
  }

  std::string_view t_;
  size_t p_ = 0;
  int32_t groups_ = 0;  // open parentheses
  std::vector<GrammarRule> rules_;
  std::map<std::string, int32_t, std::less<>> ids_;
};

using Frag = ByteNfa::Frag;

// Rule references inline a fresh copy of their rule; recursion is cut at max_recursion, tail
// references loop (grammar_constraint.h).
class GrammarBuilder {
 public:
  GrammarBuilder(const std::vector<GrammarRule>& rules, ByteNfa& nfa, int32_t max_recursion)
      : rules_(rules), n_(nfa), max_recursion_(max_recursion), active_(rules.size(), 0) {}

  Frag rule(int32_t r, bool tail_in_parent) {
    const int32_t entry = n_.add();
    stack_.push_back({r, entry, tail_in_parent});
    ++active_[size_t(r)];
    const Frag body = node(rules_[size_t(r)].body, true);
    --active_[size_t(r)];
    stack_.pop_back();
    n_.eps(entry, body.in);
    return {entry, body.out};
  }

 private:
  struct Frame {
    int32_t rule, entry;
    bool tail_in_parent;  // its reference was the last thing its parent rule matches
  };

  // `tail`: nothing follows this node up to the end of the innermost rule being expanded.
  Frag node(const GrammarNode& g, bool tail) {
    check(depth_ < kMaxBuildDepth,
          "grammar: rules, groups and repetitions nest deeper than {} (inside rule '{}'); "
          "use fewer rules inside one another or a lower recursion depth",
          kMaxBuildDepth, rules_[size_t(stack_.back().rule)].name);
    ++depth_;
    const Frag f = build(g, tail);
    --depth_;
    return f;
  }
  Frag build(const GrammarNode& g, bool tail) {
    using K = GrammarNode::Kind;
    switch (g.kind) {
      case K::Seq: {
        if (g.kids.empty()) return n_.empty();
        Frag f = node(g.kids[0], tail && g.kids.size() == 1);
        for (size_t i = 1; i < g.kids.size(); ++i)
          f = n_.seq(f, node(g.kids[i], tail && i + 1 == g.kids.size()));
        return f;
      }
      case K::Alt: {
        std::vector<Frag> fs;
        for (const auto& k : g.kids) fs.push_back(node(k, tail));
        return n_.alt(fs);
      }
      case K::Bytes: return n_.lit(g.bytes);
      case K::Class: return n_.code_points(g.ranges);
      case K::Repeat: {
        // At most one copy: whatever follows it follows the rule, so tail-ness carries over.
        const bool inner_tail = tail && g.max == 1;
        return n_.repeat([&] { return node(g.kids[0], inner_tail); }, g.min, g.max);
      }
      case K::Ref: return reference(g.rule, tail);
    }
    throw Error("internal: unknown grammar node");
  }

  Frag reference(int32_t r, bool tail) {
    if (tail) {
      // A tail reference to a rule being expanded, through tail references only: matching it
      // again from its start ends where this expansion ends, so loop instead of nesting.
      for (size_t k = stack_.size(); k-- > 0;) {
        if (stack_[k].rule == r) {
          const Frag loop = n_.nothing();
          n_.eps(loop.in, stack_[k].entry);
          return loop;
        }
        if (!stack_[k].tail_in_parent) break;
      }
    }
    if (active_[size_t(r)] > max_recursion_) return n_.nothing();
    return rule(r, tail);
  }

  const std::vector<GrammarRule>& rules_;
  ByteNfa& n_;
  int32_t max_recursion_;
  std::vector<int32_t> active_;  // expansions of each rule on the stack
  std::vector<Frame> stack_;
  int32_t depth_ = 0;  // node() calls in progress
};

}  // namespace

ByteDfa compile_grammar(std::string_view gbnf, int32_t max_states, int32_t max_recursion) {
  check(max_states > 0 && max_recursion >= 0,
        "grammar: max_states must be positive and max_recursion non-negative (got {}, {})",
        max_states, max_recursion);
  GrammarParser parser(gbnf);
  const std::vector<GrammarRule> rules = parser.parse();
  const int32_t root = parser.root();
  check(root >= 0, "grammar: no 'root' rule (the start rule: root ::= ...)");
  const std::string hint = fmt::format(
      "simplify the grammar (smaller repetition counts, fewer rule references inside "
      "repeated or recursive rules) or lower the recursion depth ({})",
      max_recursion);
  ByteNfa nfa(size_t(max_states) * 8, "grammar", hint);
  const Frag f = GrammarBuilder(rules, nfa, max_recursion).rule(root, false);
  ByteDfa d = nfa_to_dfa(nfa, f, max_states, "grammar");
  check(std::any_of(d.accepting.begin(), d.accepting.end(), [](uint8_t a) { return a != 0; }),
        "grammar: 'root' matches no text (within the recursion depth {}: every derivation "
        "nests deeper, or a character class is empty)",
        max_recursion);
  return d;
}

}  // namespace edgevl
