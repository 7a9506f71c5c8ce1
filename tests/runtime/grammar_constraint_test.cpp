// GBNF grammars compiled to byte-level DFAs: hand-written texts they must accept and reject
// (literals, escapes, classes over UTF-8 code points, repetition, groups, comments, recursion
// bounds), every error with its message, and random-logit walks over a model's vocabulary that
// must end in text the grammar accepts.
#include "runtime/constraints/grammar_constraint.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "compiler/tokenizer_import.h"
#include "core/error.h"
#include "runtime/constraints/token_constraint.h"
#include "support/constraint_walk.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

// llama.cpp's grammars/json.gbnf in shape (objects at the root, values recursing through
// objects and arrays), with full strings and numbers.
const char* kJsonGrammar = R"(# JSON, compact or spaced
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{1,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws

# Optional space: a tail reference, so any amount of it
ws ::= ([ \t\n] ws)?
)";

const char* kArithmeticGrammar = R"g(root   ::= expr
expr   ::= term (space [-+] space term)*
term   ::= factor (space [*/] space factor)*
factor ::= number | "(" space expr space ")" | "-" factor
number ::= [0-9]+ ("." [0-9]+)?
space  ::= " "?
)g";

void expect_error(std::string_view gbnf, const std::string& fragment, int32_t max_states = 200000,
                  int32_t max_recursion = kGrammarMaxRecursion) {
  try {
    compile_grammar(gbnf, max_states, max_recursion);
    ADD_FAILURE() << "accepted: " << gbnf;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "expected '" << fragment << "' in: " << e.what();
  }
}

TEST(GrammarConstraint, LiteralsAndEscapes) {
  const ByteDfa d = compile_grammar(R"(root ::= "hello" " " "world")");
  EXPECT_TRUE(d.matches("hello world"));
  for (const char* bad : {"", "hello", "hello world!", "hello  world", "Hello world"})
    EXPECT_FALSE(d.matches(bad)) << bad;
  const ByteDfa e = compile_grammar(R"(root ::= "a\n\t\r\"\\\[\]\x41\xe9\u00e9\u20AC\U0001F600")");
  EXPECT_TRUE(e.matches("a\n\t\r\"\\[]A\xC3\xA9\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
  EXPECT_FALSE(
      e.matches("a\n\t\r\"\\[]A\xE9\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));  // \xe9 is U+E9
  EXPECT_TRUE(compile_grammar("root ::= \"h\xC3\xA9llo\"").matches("h\xC3\xA9llo"));  // raw UTF-8
  EXPECT_TRUE(compile_grammar(R"(root ::= "")").matches(""));
}

TEST(GrammarConstraint, AsciiClasses) {
  const ByteDfa d = compile_grammar(R"(root ::= [a-c0-9_]+ [^"\\]?)");
  for (const char* ok : {"a", "abc_019", "c9x", "b-", "0\xC3\xA9"})
    EXPECT_TRUE(d.matches(ok)) << ok;
  for (const char* bad : {"", "d", "ab\"", "ab\\", "a b", "x"}) EXPECT_FALSE(d.matches(bad)) << bad;
  const ByteDfa dash = compile_grammar(R"(root ::= [-a] [a-] [\]] [\x00-\x1f])");
  EXPECT_TRUE(dash.matches(std::string("-a]\0", 4)));
  EXPECT_TRUE(dash.matches("a-]\x1f"));
  EXPECT_FALSE(dash.matches("b-]\x1f"));
}

TEST(GrammarConstraint, MultibyteClasses) {
  const ByteDfa d = compile_grammar("root ::= [\xE3\x81\x81-\xE3\x82\x9F]+");  // [ぁ-ゟ]
  EXPECT_TRUE(d.matches("\xE3\x81\xB2\xE3\x82\x89\xE3\x81\x8C\xE3\x81\xAA"));  // ひらがな
  EXPECT_FALSE(d.matches("\xE3\x82\xAB"));                                     // カ (katakana)
  EXPECT_FALSE(d.matches("\xE3\x81"));                                         // truncated
  const ByteDfa any = compile_grammar("root ::= .");
  for (const char* ok :
       {"x", "\x7F", "\xC3\xA9", "\xEF\xBF\xBF", "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"})
    EXPECT_TRUE(any.matches(ok)) << ok;
  for (const char* bad :
       {"", "ab", "\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xED\xBF\xBF",
        "\xF0\x80\x80\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80"})
    EXPECT_FALSE(any.matches(bad)) << bad;
}

// Every code point against a negated class with 1-, 2-, 3- and 4-byte members and a range that
// spans the surrogate gap: the DFA accepts exactly the encodings of the code points outside it.
TEST(GrammarConstraint, NegatedClassOverAllCodePoints) {
  const ByteDfa d =
      compile_grammar(R"(root ::= [^a-z\u00e9\u0800-\u0fff\uD7F0-\uE010\U0001F600\U0010FFFF])");
  auto listed = [](uint32_t cp) {
    return (cp >= 'a' && cp <= 'z') || cp == 0xE9 || (cp >= 0x800 && cp <= 0xFFF) ||
           (cp >= 0xD7F0 && cp <= 0xE010) || cp == 0x1F600 || cp == 0x10FFFF;
  };
  int64_t accepted = 0;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const bool ok = d.matches(utf8_encode(cp));
    ASSERT_EQ(ok, !listed(cp)) << std::hex << "U+" << cp;
    accepted += ok;
  }
  EXPECT_EQ(accepted, 0x110000 - 0x800 - 26 - 1 - 0x800 - (0xE010 - 0xD7F0 + 1 - 0x800) - 2);
  // Surrogates (as CESU-style 3-byte forms) are never characters, listed or not.
  const ByteDfa all = compile_grammar(R"(root ::= [^a])");
  for (uint32_t cp = 0xD800; cp <= 0xDFFF; cp += 0x7F) {
    const std::string s{char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)),
                        char(0x80 | (cp & 0x3F))};
    EXPECT_FALSE(all.matches(s)) << std::hex << cp;
  }
  EXPECT_TRUE(all.matches("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(all.matches("a"));
}

TEST(GrammarConstraint, RepetitionBounds) {
  const ByteDfa d = compile_grammar(R"(root ::= "a"{2,4} "b"{3} "c"{2,} "d"{0,1} "e"{ 0 , 2 })");
  for (const char* ok : {"aabbbcc", "aaaabbbccccccd", "aaabbbccdee", "aabbbcce"})
    EXPECT_TRUE(d.matches(ok)) << ok;
  for (const char* bad :
       {"abbbcc", "aaaaabbbcc", "aabbcc", "aabbbbcc", "aabbbc", "aabbbccdd", "aabbbcceee"})
    EXPECT_FALSE(d.matches(bad)) << bad;
  const ByteDfa z = compile_grammar(R"(root ::= "x" "y"{0} "z"* "w"+ "v"?)");
  EXPECT_TRUE(z.matches("xw"));
  EXPECT_TRUE(z.matches("xzzzwwv"));
  EXPECT_FALSE(z.matches("xyw"));
  EXPECT_FALSE(z.matches("xz"));
}

TEST(GrammarConstraint, GroupsAlternativesAndEmpty) {
  const ByteDfa d = compile_grammar(R"(root ::= ("ab" | "c" | ) ("x" ("y" | "z"))+ "!")");
  for (const char* ok : {"xy!", "abxy!", "cxzxy!"}) EXPECT_TRUE(d.matches(ok)) << ok;
  for (const char* bad : {"!", "abcxy!", "xyz!", "abx!"}) EXPECT_FALSE(d.matches(bad)) << bad;
  const ByteDfa s = compile_grammar(R"(root ::= | " " | "\n" [ \t]{0,2})");
  for (const char* ok : {"", " ", "\n", "\n\t "}) EXPECT_TRUE(s.matches(ok)) << ok;
  EXPECT_FALSE(s.matches("\n   "));
}

TEST(GrammarConstraint, CommentsAndMultiLineRules) {
  const ByteDfa d = compile_grammar(R"(# a header comment

root ::= greeting   # trailing comment
  " " name
  | "bye"
greeting ::= "hi" |
  "hello"
name ::= (
  "bob" # inside a group
  | "alice"
)
)");
  for (const char* ok : {"hi bob", "hello alice", "bye"}) EXPECT_TRUE(d.matches(ok)) << ok;
  for (const char* bad : {"hi", "bye bob", "hello  bob"}) EXPECT_FALSE(d.matches(bad)) << bad;
  // CRLF line ends and a rule name with digits and dashes.
  EXPECT_TRUE(compile_grammar("root ::= item-2\r\nitem-2 ::= \"ok\"\r\n").matches("ok"));
}

TEST(GrammarConstraint, RecursionDepthBound) {
  for (int32_t k : {0, 1, 3, 6}) {
    const ByteDfa d = compile_grammar(R"g(root ::= "(" root ")" | "")g", 200000, k);
    const std::string in(size_t(k), '('), out(size_t(k), ')');
    EXPECT_TRUE(d.matches(in + out)) << "depth " << k;
    EXPECT_FALSE(d.matches(in + "()" + out)) << "depth " << k + 1;
  }
  // Indirect: a -> b -> a.
  const ByteDfa ab =
      compile_grammar("root ::= a\na ::= \"[\" b? \"]\"\nb ::= \"<\" a \">\"", 200000, 2);
  EXPECT_TRUE(ab.matches("[<[<[]>]>]"));
  EXPECT_FALSE(ab.matches("[<[<[<[]>]>]>]"));
}

TEST(GrammarConstraint, TailRecursionIsUnbounded) {
  const ByteDfa d = compile_grammar(R"(root ::= "a" root | "b")", 200000, 1);
  EXPECT_TRUE(d.matches(std::string(1000, 'a') + "b"));
  EXPECT_FALSE(d.matches(std::string(1000, 'a')));
  // Mutual tail recursion through another rule.
  const ByteDfa m = compile_grammar("root ::= \"x\" other | \"\"\nother ::= \"y\" root", 200000, 0);
  EXPECT_TRUE(m.matches("xyxyxyxyxyxy"));
  EXPECT_FALSE(m.matches("xyx"));
}

TEST(GrammarConstraint, ArithmeticExpressions) {
  const auto t0 = std::chrono::steady_clock::now();
  const ByteDfa d = compile_grammar(kArithmeticGrammar);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "arithmetic grammar (recursion %d): NFA %lld states, DFA %d states x %d classes, "
      "%.1f ms\n",
      kGrammarMaxRecursion, (long long)d.nfa_states, d.num_states, d.num_classes, ms);
  // Parentheses nest through expr -> term -> factor -> expr: kGrammarMaxRecursion levels.
  for (const char* ok : {"1", "1+2*3", "(1 + 2) * 3.5", "--4", "-(2)/7.25 - 3", "(((1)))"})
    EXPECT_TRUE(d.matches(ok)) << ok;
  for (const char* bad : {"", "1+", "(1", "1..2", "1 2", "+1", "((((1))))"})
    EXPECT_FALSE(d.matches(bad)) << bad;
}

TEST(GrammarConstraint, JsonGrammarNestsToTheDepth) {
  const auto t0 = std::chrono::steady_clock::now();
  const ByteDfa d = compile_grammar(kJsonGrammar);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "json grammar (recursion %d): NFA %lld states, DFA %d states x %d classes, "
      "%.1f ms\n",
      kGrammarMaxRecursion, (long long)d.nfa_states, d.num_states, d.num_classes, ms);
  for (const char* ok :
       {"{}", R"({"a":1})", R"({"a":[1,-2.5e3,"x\n\u00e9",true,null],"b":{"c":{}}})",
        "{ \"k\" : [ ] , \"\xC3\xA9\":false }\n", R"({"a":{"b":{"c":{"d":1}}}})",
        R"({"a":[{"b":[]}]})"})
    EXPECT_TRUE(d.matches(ok)) << ok;
  for (const char* bad : {"[]", "1", R"({"a":{"b":{"c":{"d":{}}}}})", R"({"a":01})",
                          R"({"a":"\q"})", "{\"a\":\"\x01\"}", R"({"a",1})", R"({"a":1,})"})
    EXPECT_FALSE(d.matches(bad)) << bad;
}

TEST(GrammarConstraint, SyntaxErrorsNameLineAndColumn) {
  expect_error(R"(item ::= "x")", "grammar: no 'root' rule");
  expect_error(R"(root ::= foo)", "grammar: line 1, column 10: undefined rule 'foo'");
  expect_error("root ::= \"a\"\n\nroot ::= \"b\"",
               "line 3, column 1: rule 'root' is already defined at line 1, column 1");
  expect_error(R"(root = "a")", "line 1, column 6: expected '::=' after 'root'");
  expect_error("root ::= \"a\"\n  = \"b\"", "line 2, column 3: unexpected '='");
  expect_error("root ::= \"a\"\n!x ::= \"b\"", "line 2, column 1: unexpected '!'");
  expect_error(R"(root ::= "abc)", "line 1, column 10: the string literal is never closed");
  expect_error(R"(root ::= [a-z)", "line 1, column 10: the character class is never closed");
  expect_error(R"(root ::= "\q")", "line 1, column 11: unknown escape '\\q'");
  expect_error(R"(root ::= "\x4")", "the escape needs 2 hex digits");
  expect_error(R"(root ::= [\U00110000])", "U+110000 is above U+10FFFF");
  expect_error(R"(root ::= "\uD800")", "U+D800 is a surrogate");
  expect_error(R"(root ::= [z-a])", "line 1, column 11: the range U+7A-U+61 is reversed");
  expect_error(R"(root ::= ("a" | "b")", "line 1, column 10: '(' is never closed");
  expect_error(R"(root ::= ("a" "b"])", "line 1, column 18: expected ')', unexpected ']'");
  expect_error(R"(root ::= "a"))", "line 1, column 13: unexpected ')'");
  expect_error(R"(root ::= *"a")", "line 1, column 10: '*' has no item before it to repeat");
  expect_error(R"(root ::= "a"{3,2})", "repetition {3,2}: the maximum is below the minimum");
  expect_error(R"(root ::= "a"{x})", "line 1, column 14: expected a number");
  expect_error(R"(root ::= "a"{2)", "expected '}' to end the repetition");
  expect_error(R"(root ::= "a"{99999999})", "repetition count above 1000000");
  expect_error("root ::= \"\xC3\"", "line 1, column 11: invalid UTF-8");
  expect_error("root ::= \"\xED\xA0\x80\"", "invalid UTF-8");  // a surrogate, raw
  expect_error("root ::= \"\xC3\xA9\" foo", "line 1, column 14: undefined rule 'foo'");  // chars
  expect_error("root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')'),
               "groups nest deeper than 64");
  expect_error("root ::= \"a\"" + std::string(70, '*'), "nest deeper than 64");
}

TEST(GrammarConstraint, RefusesWhatCannotBeBuilt) {
  expect_error(R"g(root ::= "(" root ")")g", "grammar: 'root' matches no text");
  expect_error(R"(root ::= [^\x00-\U0010FFFF])", "matches no text");
  expect_error(R"(root ::= [a-z]{3000})", "grammar: the automaton exceeds 4000 NFA states", 500);
  expect_error(R"(root ::= [ab]* "a" [ab]{12})", "grammar: the automaton exceeds 1000 states",
               1000);
  expect_error("root ::= \"x\"", "max_recursion", 1000, -1);
  // Exponential inlining (2^40 copies) and a long chain of rules: refused, quickly.
  std::string doubling = "root ::= r0\n";
  for (int i = 0; i < 40; ++i)
    doubling += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " r" +
                std::to_string(i + 1) + "\n";
  doubling += "r40 ::= \"ab\"\n";
  const auto t0 = std::chrono::steady_clock::now();
  expect_error(doubling, "NFA states");
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 5000; ++i)
    chain += "r" + std::to_string(i) + " ::= \"a\" r" + std::to_string(i + 1) + " \"b\"\n";
  chain += "r5000 ::= \"z\"\n";
  expect_error(chain, "nest deeper than 2000");
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(sec, 10.0);
  std::printf("hostile grammars refused in %.2f s\n", sec);
}

// Random-logit walks over a vocabulary through the token constraint and its budget (every
// allowed token has a chance, unlike a random-weight model's peaked distributions): every walk
// must end, within its budget, in text the grammar's DFA accepts.
void vocabulary_walks(const text::Tokenizer& tok, const char* name, int walks_per_grammar) {
  auto vocab = std::make_shared<const TokenVocabulary>(tok);
  const int32_t eos = tok.eos_id();
  ASSERT_GE(eos, 0);
  const char* grammars[] = {
      kArithmeticGrammar,
      kJsonGrammar,
      "root ::= line{1,3}\nline ::= [^\\n#]{1,12} \"\\n\"",
      "root ::= (\"yes\" | \"no\" | \"maybe\") (\", \" [a-z]+)?",
  };
  std::mt19937 rng(11);
  std::vector<float> logits(size_t(tok.vocab_size())), masked;
  for (size_t k = 0; k < std::size(grammars); ++k) {
    const auto c = std::make_shared<const TokenConstraint>(compile_grammar(grammars[k]), vocab);
    const ByteDfa& dfa = c->dfa();
    const int32_t need = c->min_tokens(c->start());
    ASSERT_GE(need, 1);
    double mask_ms = 0;
    int steps = 0, walks = 0;
    for (int w = 0; w < walks_per_grammar; ++w, ++walks) {
      const int32_t budget = w % 4 == 0 ? need + w % 3 : need + w % 80;
      const test::ConstraintWalk walk = test::walk_constraint(*c, eos, budget, rng, logits, masked);
      mask_ms += walk.mask_ms;
      steps += walk.steps;
      ASSERT_EQ(walk.error, "") << "grammar " << k;
      const std::string& text = walk.text;
      ASSERT_LE(walk.tokens, budget);
      ASSERT_TRUE(c->accepting(walk.state))
          << "grammar " << k << " budget " << budget << ": " << text;
      ASSERT_TRUE(dfa.matches(text)) << "grammar " << k << ": " << text;
      if (w < 2) std::printf("%s grammar %zu, budget %d: %s\n", name, k, budget, text.c_str());
    }
    const auto st = c->stats();
    std::printf(
        "%s grammar %zu: DFA %d states x %d classes, shortest text %d tokens, %d walks; mask "
        "%.3f ms/step over %d steps, %.3f without the first-visit tables (%.1f ms)\n",
        name, k, st.dfa_states, st.byte_classes, need, walks, mask_ms / steps, steps,
        (mask_ms - st.tables_ms) / steps, st.tables_ms);
  }
}

TEST(GrammarConstraint, RandomLogitWalksEndInTheLanguage) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", "f32");
  vocabulary_walks(m.tokenizer(), "golden qwen2", 150);
}

// Figures over a real vocabulary (151k tokens), when ../shared/data has it.
TEST(GrammarConstraint, RealQwen2Vocabulary) {
  const auto dir = test::shared_data("qwen2-tokenizer");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("qwen2-tokenizer");
  vocabulary_walks(text::Tokenizer(compiler::load_tokenizer_dir(dir)), "qwen2", 24);
}

}  // namespace
}  // namespace edgevl
