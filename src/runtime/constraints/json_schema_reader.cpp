#include "runtime/constraints/json_schema_reader.h"

#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"

namespace edgevl {

namespace {

using json = nlohmann::ordered_json;  // properties keep their declared order

// The most a length or count bound may be: each unit of a bound is a copy of its states.
constexpr int64_t kMaxBound = 4096;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(fmt::format("json schema: {} at {}", what, path));
}

int32_t bound(const json& j, const char* key, const std::string& path) {
  const json& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxBound)
    fail(path, fmt::format("'{}' must be an integer in 0..{}", key, kMaxBound));
  return int32_t(v.get<int64_t>());
}

// Nesting of schemas inside schemas: deeper is refused (recursion, and automaton size).
constexpr int kMaxDepth = 32;

JsonSchema parse(const json& j, const std::string& path, int depth);

JsonSchema of_type(const std::string& type, const json& j, const std::string& path, int depth) {
  using T = JsonSchema::Type;
  JsonSchema s;
  if (type == "object") {
    s.type = T::Object;
    if (j.contains("properties")) {
      const json& props = j["properties"];
      if (!props.is_object()) fail(path, "'properties' must be an object");
      for (const auto& [name, sub] : props.items()) {
        s.names.push_back(name);
        s.props.push_back(parse(sub, path + "/properties/" + name, depth + 1));
        s.required.push_back(false);
      }
    }
    if (j.contains("required")) {
      const json& req = j["required"];
      if (!req.is_array()) fail(path, "'required' must be an array of property names");
      for (const json& r : req) {
        if (!r.is_string()) fail(path, "'required' must be an array of property names");
        const auto it = std::find(s.names.begin(), s.names.end(), r.get<std::string>());
        if (it == s.names.end())
          fail(path, fmt::format("required property '{}' is not in 'properties' (extra keys "
                                 "are not generated)",
                                 r.get<std::string>()));
        s.required[size_t(it - s.names.begin())] = true;
      }
    }
    // No properties and no others allowed: the empty object is the only document.
    if (s.props.empty() && j.contains("additionalProperties") &&
        j["additionalProperties"] == false) {
      s = JsonSchema::of(T::Enum);
      s.literals = {"{}"};
    }
  } else if (type == "array") {
    s.type = T::Array;
    if (j.contains("items")) s.items.push_back(parse(j["items"], path + "/items", depth + 1));
    if (j.contains("minItems")) s.min_items = bound(j, "minItems", path);
    if (j.contains("maxItems")) s.max_items = bound(j, "maxItems", path);
    if (s.max_items >= 0 && s.max_items < s.min_items) fail(path, "'maxItems' < 'minItems'");
  } else if (type == "string") {
    s.type = T::String;
    if (j.contains("minLength")) s.min_length = bound(j, "minLength", path);
    if (j.contains("maxLength")) s.max_length = bound(j, "maxLength", path);
    if (s.max_length >= 0 && s.max_length < s.min_length) fail(path, "'maxLength' < 'minLength'");
  } else if (type == "number") {
    s.type = T::Number;
  } else if (type == "integer") {
    s.type = T::Integer;
  } else if (type == "boolean") {
    s.type = T::Boolean;
  } else if (type == "null") {
    s.type = T::Null;
  } else {
    fail(path, fmt::format("unknown type '{}'", type));
  }
  return s;
}

JsonSchema parse(const json& j, const std::string& path, int depth) {
  using T = JsonSchema::Type;
  if (depth > kMaxDepth) fail(path, fmt::format("schemas nested deeper than {}", kMaxDepth));
  if (j.is_boolean()) {
    if (!j.get<bool>()) fail(path, "the schema 'false' allows no document");
    return JsonSchema::of(T::Any);
  }
  if (!j.is_object()) fail(path, "a schema must be an object");
  static const std::set<std::string> known{
      "type",      "properties",  "required", "additionalProperties",
      "items",     "minItems",    "maxItems", "minLength",
      "maxLength", "enum",        "const",    "anyOf",
      "title",     "description", "$schema",  "$id",
      "default",   "examples",    "$comment"};
  for (const auto& [key, v] : j.items())
    if (!known.count(key)) fail(path, fmt::format("unsupported keyword '{}'", key));
  if (j.contains("additionalProperties") && !j["additionalProperties"].is_boolean())
    fail(path, "'additionalProperties' is supported as true or false only");

  if (j.contains("enum") || j.contains("const")) {
    JsonSchema s = JsonSchema::of(T::Enum);
    if (j.contains("const")) {
      s.literals.push_back(j["const"].dump(-1, ' ', false));
    } else {
      if (!j["enum"].is_array() || j["enum"].empty())
        fail(path, "'enum' must be a non-empty array");
      for (const json& v : j["enum"]) s.literals.push_back(v.dump(-1, ' ', false));
    }
    return s;
  }
  if (j.contains("anyOf")) {
    const json& alts = j["anyOf"];
    if (!alts.is_array() || alts.empty()) fail(path, "'anyOf' must be a non-empty array");
    if (j.contains("type")) fail(path, "'anyOf' next to 'type' is not supported");
    JsonSchema s = JsonSchema::of(T::AnyOf);
    for (size_t i = 0; i < alts.size(); ++i)
      s.alternatives.push_back(parse(alts[i], path + "/anyOf/" + std::to_string(i), depth + 1));
    return s;
  }
  if (!j.contains("type")) {
    if (j.contains("properties") || j.contains("required"))
      return of_type("object", j, path, depth);
    if (j.contains("items")) return of_type("array", j, path, depth);
    return JsonSchema::of(T::Any);
  }
  const json& type = j["type"];
  if (type.is_string()) return of_type(type.get<std::string>(), j, path, depth);
  if (!type.is_array() || type.empty())
    fail(path, "'type' must be a type name or a non-empty array of them");
  JsonSchema s = JsonSchema::of(T::AnyOf);
  for (const json& t : type) {
    if (!t.is_string()) fail(path, "'type' must be a type name or a non-empty array of them");
    s.alternatives.push_back(of_type(t.get<std::string>(), j, path, depth));
  }
  return s.alternatives.size() == 1 ? s.alternatives[0] : s;
}

}  // namespace

JsonSchema parse_json_schema(const nlohmann::ordered_json& schema) {
  return parse(schema, "#", 0);
}

JsonSchema parse_json_schema_text(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("json schema: not valid JSON: {}", e.what()));
  }
  return parse_json_schema(j);
}

JsonSchema load_json_schema_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "cannot read the JSON schema file {}", path);
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return parse_json_schema_text(ss.str());
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
}

JsonSchema any_json_object(int32_t depth) {
  JsonSchema s = JsonSchema::of(JsonSchema::Type::Object);
  s.any_depth = depth;
  return s;
}

}  // namespace edgevl
