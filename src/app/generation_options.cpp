#include "app/generation_options.h"

#include <charconv>
#include <cmath>

#include "core/error.h"
#include "core/mapped_file.h"
#include "runtime/constraints/grammar_constraint.h"
#include "runtime/constraints/json_schema_reader.h"

namespace edgevl::app {

ByteDfa load_grammar_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return compile_grammar(text);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
}

void add_generation_flags(CLI::App* cmd, GenerationFlags* f) {
  SamplerParams& sp = f->sp;
  cmd->add_option("--temp", sp.temperature, "Temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", sp.top_k, "Top-k (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", sp.top_p, "Top-p (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", sp.min_p, "Min-p (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", sp.repeat_penalty, "Repetition penalty, CTRL-style (1 = off)")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", sp.presence_penalty,
                  "Subtracted from the logit of every token in the window (0 = off)")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", sp.frequency_penalty,
                  "Subtracted once per occurrence in the window (0 = off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", sp.repeat_last_n,
                  "Tokens the penalties look back over (-1 = whole context, 0 = off)")
      ->capture_default_str();
  cmd->add_option("--logit-bias", f->logit_bias,
                  "TOKEN_ID+BIAS or TOKEN_ID-BIAS added to a logit; TOKEN_ID=-inf bans it "
                  "(repeatable)");
  cmd->add_option("--seed", sp.seed, "Sampling seed (0 = random)");
  cmd->add_option("--stop", f->stops, "Stop string (repeatable)");
  cmd->add_option("--lookup", f->lookup,
                  "Speculative decoding with prompt lookup: drafts from the longest n-gram "
                  "(n <= N) of the context's end seen earlier in it (0 = off)")
      ->capture_default_str();
  cmd->add_option("--draft", f->draft,
                  "Speculative decoding with a small draft model (.evb with the same tokenizer)");
  cmd->add_option("--draft-k", f->draft_k, "Most tokens drafted per verification pass")
      ->capture_default_str();
  cmd->add_option("--json-schema", f->json_schema,
                  "Constrain the output to a JSON document valid under this JSON Schema file "
                  "(a subset: README); it always ends complete within -n tokens");
  cmd->add_flag("--json-object", f->json_object,
                "Constrain the output to a JSON object (any keys, nesting up to 3 levels)");
  cmd->add_option("--grammar", f->grammar,
                  fmt::format("Constrain the output to the language of this GBNF grammar file "
                              "(llama.cpp's dialect; recursion nests at most {} levels: README); "
                              "it always ends complete within -n tokens",
                              kGrammarMaxRecursion));
}

std::pair<int32_t, float> parse_logit_bias(const std::string& spec) {
  const size_t at = spec.find_first_of("+-=", 1);
  int32_t id = -1;
  const char* end = spec.data() + (at == std::string::npos ? spec.size() : at);
  const auto [ptr, ec] = std::from_chars(spec.data(), end, id);
  check(at != std::string::npos && ec == std::errc{} && ptr == end && at + 1 < spec.size(),
        "--logit-bias '{}': expected TOKEN_ID+BIAS, TOKEN_ID-BIAS or TOKEN_ID=BIAS (e.g. 15043+1, "
        "15043=-inf)",
        spec);
  std::string num = spec.substr(at + (spec[at] == '=' ? 1 : 0));
  if (num[0] == '+') num.erase(0, 1);
  float bias = 0;
  if (num == "-inf") {
    bias = -INFINITY;
  } else {
    size_t used = 0;
    try {
      bias = std::stof(num, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check(used == num.size() && std::isfinite(bias), "--logit-bias '{}': '{}' is not a number",
          spec, num);
  }
  return {id, bias};
}

void apply_generation_flags(const GenerationFlags& f, const Model& target, int threads,
                            GenerateOptions* g, std::unique_ptr<Model>* draft_model,
                            std::unique_ptr<DraftModel>* draft) {
  g->sampling = f.sp;
  g->sampling.logit_bias.clear();
  for (const auto& spec : f.logit_bias) g->sampling.logit_bias.push_back(parse_logit_bias(spec));
  validate_sampler_params(g->sampling, target.config().vocab_size);
  g->stop_strings.insert(g->stop_strings.end(), f.stops.begin(), f.stops.end());
  check(f.lookup >= 0, "--lookup must be >= 0 (got {})", f.lookup);
  check(f.draft_k >= 1, "--draft-k must be at least 1 (got {})", f.draft_k);
  check(f.lookup == 0 || f.draft.empty(), "--lookup and --draft are alternatives: choose one");
  check(int(!f.json_schema.empty()) + int(f.json_object) + int(!f.grammar.empty()) <= 1,
        "--json-schema, --json-object and --grammar are alternatives: choose one");
  // Named by its flags, before the grammar is compiled (the generator refuses it too).
  check(f.grammar.empty() || (f.lookup == 0 && f.draft.empty()),
        "--grammar cannot be combined with speculative decoding (--lookup / --draft)");
  if (f.constrained()) {
    ByteDfa dfa = !f.grammar.empty() ? load_grammar_file(f.grammar)
                  : f.json_object    ? compile_json_schema(any_json_object())
                                     : compile_json_schema(load_json_schema_file(f.json_schema));
    g->constraint = std::make_shared<const TokenConstraint>(
        std::move(dfa), std::make_shared<const TokenVocabulary>(target.tokenizer()));
  }
  g->speculative.lookup = f.lookup;
  g->speculative.draft_k = f.draft_k;
  if (!f.draft.empty()) {
    *draft_model = std::make_unique<Model>(f.draft);
    *draft = std::make_unique<DraftModel>(**draft_model, target, SessionOptions{threads, 0});
    g->speculative.draft = draft->get();
  }
}

}  // namespace edgevl::app
