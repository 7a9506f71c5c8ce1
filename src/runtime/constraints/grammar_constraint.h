#pragma once
// A GBNF grammar (the dialect of llama.cpp's grammars/README.md) compiled to a byte-level DFA
// that accepts exactly the UTF-8 texts the grammar derives from `root`, for constrained
// generation through runtime/constraints/token_constraint.h (`--grammar FILE`).
//
// Syntax: rules `name ::= body` (names [a-zA-Z0-9-]+; `root` is the start rule); in a body,
// sequences, alternatives `|`, groups `( )`, postfix `*` `+` `?` `{m}` `{m,}` `{m,n}`, string
// literals "..." and character classes `[a-z_]` / negated `[^"\\]` over Unicode code points
// (written as UTF-8 or escaped: \n \t \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH, each a code point
// emitted as UTF-8), `.` for any code point, comments `#` to the end of the line. A body
// continues on the next line inside parentheses, after `::=` or `|`, and wherever the next line
// does not start a new rule (`name ::=`). Negation and `.` cover the valid code points only
// (U+0000..U+10FFFF without the surrogates D800-DFFF).
//
// A DFA recognizes regular languages, a grammar may be context-free: every rule reference
// inlines a fresh copy of its rule (an NFA has no return stack), and recursion is expanded to a
// bound. A reference to a rule that is already being expanded `max_recursion` times contributes
// the empty language, so documents nest at most that deep: with llama.cpp's json.gbnf
// (value -> object -> value) and max_recursion 3, containers nest 4 levels (the root's and 3
// inside it). Tail references are exact instead: a reference that is the last thing its rule
// matches (through alternatives, `?` and further tail references), as in
// `ws ::= ([ \t\n] ws)?`, loops back to the rule's start with no bound.
//
// Errors are edgevl::Error: syntax errors, undefined rules and duplicate definitions name the
// line and column; a missing root, a grammar that accepts nothing within the bound, and an
// automaton past `max_states` DFA states (or 8x that many NFA states, or a construction work
// bound) are refused too, before they take the memory or the time.
#include <cstdint>
#include <string_view>

#include "runtime/constraints/byte_nfa.h"

namespace edgevl {

inline constexpr int32_t kGrammarMaxRecursion = 3;

ByteDfa compile_grammar(std::string_view gbnf, int32_t max_states = 200000,
                        int32_t max_recursion = kGrammarMaxRecursion);

}  // namespace edgevl
