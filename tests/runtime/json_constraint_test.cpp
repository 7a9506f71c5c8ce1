// The byte-level automaton of a JSON-schema subset: hand-written documents it must accept and
// reject (escapes, UTF-8, lengths in characters, item counts, property order, enums, nesting).
#include "runtime/constraints/json_constraint.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace edgevl {
namespace {

using T = JsonSchema::Type;

JsonSchema str(int32_t min = 0, int32_t max = -1) {
  JsonSchema s = JsonSchema::of(T::String);
  s.min_length = min;
  s.max_length = max;
  return s;
}

JsonSchema obj(std::vector<std::tuple<std::string, JsonSchema, bool>> props) {
  JsonSchema s = JsonSchema::of(T::Object);
  for (auto& [name, sub, req] : props) {
    s.names.push_back(name);
    s.props.push_back(sub);
    s.required.push_back(req);
  }
  return s;
}

JsonSchema arr(JsonSchema item, int32_t min = 0, int32_t max = -1) {
  JsonSchema s = JsonSchema::of(T::Array);
  s.items.push_back(std::move(item));
  s.min_items = min;
  s.max_items = max;
  return s;
}

TEST(JsonConstraint, StringEscapesAndUtf8) {
  const ByteDfa d = compile_json_schema(str());
  for (const char* ok : {R"("")", R"("abc")", R"("a\"b")", R"("\\\/\b\f\n\r\t")", R"("\u00e9")",
                         R"("\uD7FF")", "\"caf\xc3\xa9\"", "\"\xe2\x82\xac\"",
                         "\"\xf0\x9f\x98\x80\"", "\"\xf4\x8f\xbf\xbf\"", "\"\x7f\""})
    EXPECT_TRUE(d.matches(ok)) << ok;
  for (const char* bad : {"", "\"", R"("a)", R"("a"")", R"("\x")", R"("\u12")", R"("\ud800")",
                          R"("\uDC00")", "\"a\nb\"", "\"\x01\"",
                          "\"\xc0\xaf\"",          // overlong '/'
                          "\"\xc3\"",              // truncated
                          "\"\xed\xa0\x80\"",      // UTF-8 encoded surrogate
                          "\"\xf4\x90\x80\x80\"",  // above U+10FFFF
                          "\"\xe0\x80\xaf\"",      // overlong 3-byte
                          "\"\xff\"", "\"\x80\"", " \"a\""})
    EXPECT_FALSE(d.matches(bad)) << bad;
}

TEST(JsonConstraint, LengthsCountCharacters) {
  const ByteDfa d = compile_json_schema(str(2, 3));
  EXPECT_FALSE(d.matches(R"("a")"));
  EXPECT_TRUE(d.matches(R"("ab")"));
  EXPECT_TRUE(d.matches("\"\xc3\xa9\xf0\x9f\x98\x80\\n\""));  // 3 characters, 8 bytes
  EXPECT_FALSE(d.matches(R"("abcd")"));
  EXPECT_TRUE(d.matches(R"("\u0041b")"));  // an escape is one character
  EXPECT_FALSE(d.matches(R"("\u0041bcd")"));
}

TEST(JsonConstraint, NumbersAndLiterals) {
  const ByteDfa in = compile_json_schema(JsonSchema::of(T::Integer));
  for (const char* ok : {"0", "-0", "7", "-123", "123456789012345"})
    EXPECT_TRUE(in.matches(ok)) << ok;
  for (const char* bad : {"", "-", "01", "1.5", "1e3", "+1", "1234567890123456", " 1"})
    EXPECT_FALSE(in.matches(bad)) << bad;
  const ByteDfa num = compile_json_schema(JsonSchema::of(T::Number));
  for (const char* ok : {"0", "-1.5", "3.25e-7", "1E+99", "2e5", "0.000001"})
    EXPECT_TRUE(num.matches(ok)) << ok;
  for (const char* bad : {"1.", ".5", "1e", "1e100", "00.1", "1.5.2", "NaN", "-inf"})
    EXPECT_FALSE(num.matches(bad)) << bad;
  const ByteDfa b = compile_json_schema(JsonSchema::of(T::Boolean));
  EXPECT_TRUE(b.matches("true"));
  EXPECT_TRUE(b.matches("false"));
  EXPECT_FALSE(b.matches("tru"));
  EXPECT_FALSE(b.matches("null"));
  JsonSchema e = JsonSchema::of(T::Enum);
  e.literals = {R"("red")", R"("green")", "3", "null"};
  const ByteDfa en = compile_json_schema(e);
  for (const char* ok : {R"("red")", R"("green")", "3", "null"}) EXPECT_TRUE(en.matches(ok)) << ok;
  for (const char* bad : {R"("blue")", R"("re")", "30", R"("red" )"}) EXPECT_FALSE(en.matches(bad));
}

TEST(JsonConstraint, ObjectOrderRequiredOptional) {
  const JsonSchema s = obj({{"a", JsonSchema::of(T::Integer), false},
                            {"b", str(), true},
                            {"c", JsonSchema::of(T::Boolean), false}});
  const ByteDfa d = compile_json_schema(s);
  for (const char* ok : {R"({"b":""})", R"({"a":1,"b":"x"})", R"({"a": 1, "b": "x", "c": true})",
                         R"({"b":"x","c":false})"})
    EXPECT_TRUE(d.matches(ok)) << ok;
  for (const char* bad : {R"({})", R"({"a":1})", R"({"b":"x","a":1})", R"({"b":"x",})",
                          R"({,"b":"x"})", R"({"b":"x","d":1})", R"({"b":"x"}  )",
                          R"({"a":1,"a":1,"b":"x"})", R"({ "b":"x"})", R"({"b":  "x"})"})
    EXPECT_FALSE(d.matches(bad)) << bad;
  // All optional: the empty object, and no leading comma whichever comes first.
  const ByteDfa o = compile_json_schema(
      obj({{"x", JsonSchema::of(T::Null), false}, {"y", JsonSchema::of(T::Null), false}}));
  for (const char* ok : {"{}", R"({"x":null})", R"({"y":null})", R"({"x":null,"y":null})"})
    EXPECT_TRUE(o.matches(ok)) << ok;
  EXPECT_FALSE(o.matches(R"({,"y":null})"));
}

TEST(JsonConstraint, ArraysAndNesting) {
  const ByteDfa d = compile_json_schema(arr(JsonSchema::of(T::Integer), 1, 3));
  for (const char* ok : {"[1]", "[1,2]", "[1, 2, 3]"}) EXPECT_TRUE(d.matches(ok)) << ok;
  for (const char* bad : {"[]", "[1,2,3,4]", "[1,]", "[,1]", "[ 1]"})
    EXPECT_FALSE(d.matches(bad)) << bad;
  EXPECT_TRUE(compile_json_schema(arr(str(), 0, 0)).matches("[]"));
  EXPECT_FALSE(compile_json_schema(arr(str(), 0, 0)).matches(R"([""])"));
  JsonSchema color = JsonSchema::of(T::Enum);
  color.literals = {R"("red")", R"("blue")"};
  const JsonSchema nested =
      obj({{"items",
            arr(obj({{"id", JsonSchema::of(T::Integer), true}, {"color", color, false}}), 0, 2),
            true}});
  const ByteDfa n = compile_json_schema(nested);
  EXPECT_TRUE(n.matches(R"({"items":[]})"));
  EXPECT_TRUE(n.matches(R"({"items": [{"id":1}, {"id": 2, "color": "red"}]})"));
  EXPECT_FALSE(n.matches(R"({"items":[{"id":1},{"id":2},{"id":3}]})"));
  EXPECT_FALSE(n.matches(R"({"items":[{"color":"red"}]})"));
  EXPECT_FALSE(n.matches(R"({"items":[{"id":1,"color":"green"}]})"));
}

TEST(JsonConstraint, AnyValueDepthLimited) {
  JsonSchema any_obj = JsonSchema::of(T::Object);
  any_obj.any_depth = 1;
  const ByteDfa d = compile_json_schema(any_obj);
  for (const char* ok :
       {"{}", R"({"k":1})", R"({"k": [1, "x", null]})", R"({"a":{"b":true}, "c":-2.5})"})
    EXPECT_TRUE(d.matches(ok)) << ok;
  for (const char* bad : {"[]", R"({"k":[[1]]})", R"({"a":{"b":{}}})", R"({k:1})", R"({"k"})"})
    EXPECT_FALSE(d.matches(bad)) << bad;
  JsonSchema alt = JsonSchema::of(T::AnyOf);
  alt.alternatives = {str(0, 2), JsonSchema::of(T::Null)};
  const ByteDfa a = compile_json_schema(alt);
  EXPECT_TRUE(a.matches("null"));
  EXPECT_TRUE(a.matches(R"("ab")"));
  EXPECT_FALSE(a.matches(R"("abc")"));
}

TEST(JsonConstraint, KeysAreQuoted) {
  EXPECT_EQ(json_quote("a\"b\\c\n\x01"), R"("a\"b\\c\n\u0001")");
  const ByteDfa d = compile_json_schema(obj({{"we\"ird", JsonSchema::of(T::Null), true}}));
  EXPECT_TRUE(d.matches(R"({"we\"ird":null})"));
}

TEST(JsonConstraint, BadBoundsAndSizeLimit) {
  EXPECT_THROW(compile_json_schema(str(3, 2)), Error);
  EXPECT_THROW(compile_json_schema(arr(str(), 2, 1)), Error);
  EXPECT_THROW(compile_json_schema(arr(str(0, 50), 0, 50), 100), Error);
  // 4096 x 4096 characters would be ~10^9 NFA states: refused by the NFA bound, quickly.
  EXPECT_THROW(compile_json_schema(arr(arr(str(0, 4096), 0, 4096), 0, 4096)), Error);
}

}  // namespace
}  // namespace edgevl
