// JSON Schema text -> the compiled subset: what is supported compiles to the documents it
// describes (properties in declared order), the rest is refused naming keyword and path.
#include "runtime/constraints/json_schema_reader.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace edgevl {
namespace {

using ojson = nlohmann::ordered_json;

ByteDfa dfa_of(const char* schema) {
  return compile_json_schema(parse_json_schema(ojson::parse(schema)));
}

std::string error_of(const char* schema) {
  try {
    parse_json_schema(ojson::parse(schema));
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(JsonSchema, DeclaredOrderRequiredAndBounds) {
  const ByteDfa d = dfa_of(R"({"type":"object","title":"t","properties":{
      "zeta":{"type":"string","maxLength":2},
      "alpha":{"type":"array","items":{"enum":["x",1,null]},"minItems":1,"maxItems":2}},
    "required":["alpha"],"additionalProperties":false})");
  EXPECT_TRUE(d.matches(R"({"zeta":"ab","alpha":["x"]})"));
  EXPECT_TRUE(d.matches(R"({"alpha":[1, null]})"));
  EXPECT_FALSE(d.matches(R"({"alpha":["x"],"zeta":"ab"})"));  // not the declared order
  EXPECT_FALSE(d.matches(R"({"zeta":"ab"})"));                // alpha is required
  EXPECT_FALSE(d.matches(R"({"zeta":"abc","alpha":["x"]})"));
  EXPECT_FALSE(d.matches(R"({"alpha":[]})"));
  EXPECT_FALSE(d.matches(R"({"alpha":[1,1,1]})"));
  EXPECT_FALSE(d.matches(R"({"alpha":["y"]})"));
}

TEST(JsonSchema, TypeArraysConstAnyOfAndDefaults) {
  const ByteDfa t = dfa_of(R"({"type":["integer","null"]})");
  EXPECT_TRUE(t.matches("12"));
  EXPECT_TRUE(t.matches("null"));
  EXPECT_FALSE(t.matches("1.5"));
  const ByteDfa c = dfa_of(R"({"const":{"a":[1,"é"]}})");
  EXPECT_TRUE(c.matches(R"({"a":[1,"é"]})"));
  EXPECT_FALSE(c.matches(R"({"a":[1,"e"]})"));
  const ByteDfa a = dfa_of(R"({"anyOf":[{"type":"boolean"},{"type":"string","maxLength":1}]})");
  EXPECT_TRUE(a.matches("true"));
  EXPECT_TRUE(a.matches(R"("z")"));
  EXPECT_FALSE(a.matches(R"("zz")"));
  // No type: any value; properties alone: an object.
  EXPECT_TRUE(dfa_of("{}").matches(R"([1,{"k":"v"}])"));
  EXPECT_TRUE(dfa_of(R"({"properties":{"k":{"type":"null"}}})").matches(R"({"k":null})"));
  EXPECT_TRUE(compile_json_schema(any_json_object()).matches(R"({"a":{"b":[1,2]},"c":"d"})"));
  EXPECT_FALSE(compile_json_schema(any_json_object()).matches(R"([1])"));
  const ByteDfa none = dfa_of(R"({"type":"object","additionalProperties":false})");
  EXPECT_TRUE(none.matches("{}"));
  EXPECT_FALSE(none.matches(R"({"a":1})"));
}

TEST(JsonSchema, UnsupportedIsNamedWithItsPath) {
  EXPECT_EQ(error_of(R"({"type":"object","properties":{"name":{"type":"string","pattern":"a+"}}})"),
            "json schema: unsupported keyword 'pattern' at #/properties/name");
  EXPECT_EQ(error_of(R"({"type":"array","items":{"$ref":"#/defs/x"}})"),
            "json schema: unsupported keyword '$ref' at #/items");
  EXPECT_NE(error_of(R"({"type":"object","properties":{},"required":["x"]})").find("'x'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"date"})").find("unknown type 'date'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","maxLength":-1})").find("maxLength"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","minLength":3,"maxLength":2})").find("minLength"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"array","maxItems":1e9})").find("maxItems"), std::string::npos);
  EXPECT_NE(error_of(R"({"enum":[]})").find("enum"), std::string::npos);
  EXPECT_NE(error_of("false").find("no document"), std::string::npos);
  std::string deep = R"({"type":"string"})";
  for (int i = 0; i < 40; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_NE(error_of(deep.c_str()).find("nested deeper than 32"), std::string::npos);
  EXPECT_NE(error_of(R"({"additionalProperties":{"type":"string"}})").find("additionalProperties"),
            std::string::npos);
}

}  // namespace
}  // namespace edgevl
