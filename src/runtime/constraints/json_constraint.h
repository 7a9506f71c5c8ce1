#pragma once
// A subset of JSON Schema as a plain struct, compiled to a byte-level DFA that accepts exactly
// the compact JSON documents the schema allows (the form schema-constrained generation emits).
//
// Without $ref the subset has finite nesting, so its documents form a regular language: the
// schema becomes an epsilon-NFA over bytes (one fragment per schema node, copied where a node
// repeats), then a DFA by subset construction over byte classes (runtime/constraints/byte_nfa.h).
// The JSON-Schema *parsing* (JSON text to this struct) is runtime/constraints/json_schema_reader.h.
//
// The language, per node (documents are compact: the only whitespace is at most one space
// after ':' and ','):
//   object   '{' properties in declared order '}': required ones always, optional ones may be
//            left out, no other keys. Without properties: any object (keys are any strings,
//            values any JSON value, nested at most `any_depth` levels).
//   array    '[' items (min_items..max_items of `items`, comma separated) ']'
//   string   '"' chars '"': valid UTF-8 (RFC 3629: no overlongs, surrogates or > U+10FFFF),
//            no raw control characters, escapes \" \\ \/ \b \f \n \r \t \uXXXX (not a
//            surrogate); min_length..max_length characters (an escape is one character).
//   integer  -?(0|[1-9][0-9]{0,14})        (at most 15 digits: exact in a double)
//   number   integer (\.[0-9]{1,15})? ([eE][+-]?[0-9]{1,2})?  (finite in a double)
//   boolean, null: the literals.
//   enum     exactly one of the given literals (each a compact JSON text).
//   any_of   one of the alternatives (e.g. a type array ["string", "null"]).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/constraints/byte_nfa.h"

namespace edgevl {

struct JsonSchema {
  enum class Type { Any, Object, Array, String, Number, Integer, Boolean, Null, Enum, AnyOf };
  Type type = Type::Any;
  // Object: property i is (names[i], props[i]), required[i] says whether it must appear. No
  // properties at all means any object.
  std::vector<std::string> names;
  std::vector<JsonSchema> props;
  std::vector<bool> required;
  // Array: items[0] is the item schema (empty: any value).
  std::vector<JsonSchema> items;
  int32_t min_items = 0, max_items = -1;  // -1: unbounded
  // String, in characters (code points).
  int32_t min_length = 0, max_length = -1;  // -1: unbounded
  // Enum: compact JSON texts, e.g. "\"red\"", "3", "null".
  std::vector<std::string> literals;
  // AnyOf: the alternatives.
  std::vector<JsonSchema> alternatives;
  // Any (and an object without properties): how deep objects / arrays may nest inside.
  int32_t any_depth = 3;

  static JsonSchema of(Type t) {
    JsonSchema s;
    s.type = t;
    return s;
  }
};

// JSON's string form of `s` (quotes, escapes of '"', '\\' and control characters).
std::string json_quote(std::string_view s);

// Throws edgevl::Error when the schema is inconsistent (e.g. min > max) or its automaton would
// exceed `max_states` DFA states (or 8x that many NFA states: bounds multiply, so a hostile
// schema is refused before it takes the memory).
ByteDfa compile_json_schema(const JsonSchema& schema, int32_t max_states = 200000);

}  // namespace edgevl
