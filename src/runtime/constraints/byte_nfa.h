#pragma once
// The automaton machinery that constrained output shares (runtime/constraints/json_constraint.h
// compiles JSON Schema with it, runtime/constraints/grammar_constraint.h GBNF grammars): an
// epsilon-NFA over bytes built from fragments, and its DFA by subset construction over byte
// classes.
//
// An NFA has no return stack, so a sub-language used twice is two fresh fragments. Bounds
// multiply (a repeated rule inside a repeated rule ...), which makes every builder's input a
// way to ask for unbounded memory: ByteNfa refuses a state past its limit, and nfa_to_dfa()
// bounds both the DFA states and the work of the construction, so a hostile schema or grammar
// is refused in bounded time and memory instead of taking gigabytes or minutes.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace edgevl {

// A DFA over bytes. State 0 is the dead state (every transition of it returns 0).
struct ByteDfa {
  std::array<uint8_t, 256> byte_class{};  // bytes that no transition tells apart share a class
  int32_t num_classes = 0;
  int32_t num_states = 0;
  int32_t start = 0;
  std::vector<int32_t> next;       // [state * num_classes + class]
  std::vector<uint8_t> accepting;  // per state
  int64_t nfa_states = 0;          // the NFA it was made from (for the figures)

  int32_t step(int32_t s, uint8_t b) const {
    return next[size_t(s) * size_t(num_classes) + byte_class[b]];
  }
  // The state after `bytes` from `s` (0 when they leave the language).
  int32_t walk(int32_t s, std::string_view bytes) const;
  bool matches(std::string_view doc) const;
  size_t bytes() const { return next.size() * sizeof(int32_t) + accepting.size() + 256; }
};

struct ByteRange {
  uint8_t lo, hi;
};

// Inclusive code point ranges (a character class).
using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

// `ranges` sorted, merged, clipped to U+10FFFF and without the surrogates D800-DFFF: the code
// points UTF-8 can encode.
CodePointRanges normalize_code_points(CodePointRanges ranges);
// The valid code points (U+0000..U+10FFFF without the surrogates) outside `ranges`.
CodePointRanges complement_code_points(const CodePointRanges& ranges);
// The UTF-8 encodings of the code points in `ranges` (normalized first) as byte-range
// sequences: each sequence is one byte per position, the union of their products is exactly
// the set of encodings (no overlongs, no surrogates).
std::vector<std::vector<ByteRange>> utf8_sequences(const CodePointRanges& ranges);
// The UTF-8 bytes of one code point (<= U+10FFFF, no surrogate).
std::string utf8_encode(uint32_t cp);

// An epsilon-NFA over bytes, built from fragments with one entry and one exit state.
class ByteNfa {
 public:
  struct Edge {
    uint8_t lo, hi;
    int32_t to;
  };
  struct Frag {
    int32_t in, out;
  };

  // `what` names the input in errors ("json schema", "grammar"); `hint` says how to shrink it.
  ByteNfa(size_t max_states, std::string what, std::string hint);

  int32_t add();
  void eps(int32_t a, int32_t b) { eps_[size_t(a)].push_back(b); }
  void edge(int32_t a, ByteRange r, int32_t b) { edges_[size_t(a)].push_back({r.lo, r.hi, b}); }

  Frag empty();    // the empty string
  Frag nothing();  // the empty language: no path from in to out
  Frag lit(std::string_view bytes);
  // From `a` to `b` through one byte per position, each within one of its ranges.
  void path(int32_t a, int32_t b, const std::vector<std::vector<ByteRange>>& positions);
  // One code point in `ranges`, as its UTF-8 bytes (from `a` to `b`, or a fragment).
  void code_points(int32_t a, int32_t b, const CodePointRanges& ranges);
  Frag code_points(const CodePointRanges& ranges);
  Frag seq(Frag a, Frag b);
  Frag alt(const std::vector<Frag>& fs);
  Frag opt(Frag f);
  // min..max copies of make() in a row (max -1: unbounded). Every copy is a fresh fragment:
  // an NFA has no return stack, so a repeated sub-language is repeated states.
  Frag repeat(const std::function<Frag()>& make, int32_t min, int32_t max);

  size_t size() const { return edges_.size(); }
  const std::vector<Edge>& edges(int32_t s) const { return edges_[size_t(s)]; }
  const std::vector<int32_t>& eps_edges(int32_t s) const { return eps_[size_t(s)]; }
  const std::string& hint() const { return hint_; }

 private:
  std::vector<std::vector<Edge>> edges_;
  std::vector<std::vector<int32_t>> eps_;
  size_t limit_;
  std::string what_, hint_;
};

// The DFA accepting what `root` accepts (subset construction over byte classes). Throws
// edgevl::Error naming `what` when it would exceed `max_states` states, or when the sets it
// visits grow past a work bound proportional to max_states (huge epsilon closures).
ByteDfa nfa_to_dfa(const ByteNfa& nfa, ByteNfa::Frag root, int32_t max_states,
                   std::string_view what);

}  // namespace edgevl
