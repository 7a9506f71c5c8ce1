#pragma once
// JSON Schema (the subset runtime/constraints/json_constraint.h compiles) read from its JSON text,
// and the token-level constraint built from it for a model. The runtime library's one use of a JSON
// library (header-only nlohmann, this file): the CLI, the server and the C API all read
// schemas here.
//
// Supported: type (a name or an array of names), properties, required, additionalProperties
// (documents never carry extra keys, which either value allows), items, minItems, maxItems,
// minLength, maxLength, enum, const, anyOf; annotations (title, description, $schema, $id,
// default, examples, $comment) are ignored. Anything else is refused naming the keyword and
// where it is, e.g. "unsupported keyword 'pattern' at #/properties/name".
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "runtime/constraints/json_constraint.h"
#include "runtime/constraints/token_constraint.h"

namespace edgevl {

// Throws edgevl::Error naming the keyword and its path (a JSON pointer from '#').
JsonSchema parse_json_schema(const nlohmann::ordered_json& schema);
// The schema in JSON text (the C API's argument); malformed JSON is an Error too.
JsonSchema parse_json_schema_text(std::string_view text);
// Reads and parses a schema file (errors name the file).
JsonSchema load_json_schema_file(const std::string& path);
// Any JSON object (`--json-object`, response_format json_object): containers nested at most
// `depth` levels inside it.
JsonSchema any_json_object(int32_t depth = 3);

// The schema's automaton over `vocab` (inline: the request parser's fuzz target links the
// parsing above without the automaton).
inline std::shared_ptr<const TokenConstraint> make_json_constraint(
    const JsonSchema& schema, std::shared_ptr<const TokenVocabulary> vocab) {
  return std::make_shared<const TokenConstraint>(compile_json_schema(schema), std::move(vocab));
}

}  // namespace edgevl
