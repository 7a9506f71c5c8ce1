#pragma once
// The sampling and speculative-decoding flags `run` and `chat` share (one definition, so the
// two commands cannot drift apart), and the parsing of --logit-bias.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "runtime/constraints/byte_nfa.h"
#include "runtime/decoding/generate.h"
#include "runtime/decoding/speculative.h"

namespace edgevl::app {

struct GenerationFlags {
  SamplerParams sp;
  std::vector<std::string> logit_bias;  // "ID+B", "ID-B", "ID=B", "ID=-inf"
  std::vector<std::string> stops;
  int32_t lookup = 0;
  std::string draft;
  int32_t draft_k = 8;
  std::string json_schema;   // --json-schema FILE
  bool json_object = false;  // --json-object
  std::string grammar;       // --grammar FILE (GBNF, runtime/constraints/grammar_constraint.h)
  bool constrained() const { return !json_schema.empty() || json_object || !grammar.empty(); }
};

// --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --presence-penalty
// --frequency-penalty --logit-bias --seed --stop, --lookup --draft --draft-k, and
// --json-schema / --json-object / --grammar (constrained output:
// runtime/constraints/json_schema_reader.h, runtime/constraints/grammar_constraint.h).
void add_generation_flags(CLI::App* cmd, GenerationFlags* f);

// Reads and compiles a GBNF grammar file (runtime/constraints/grammar_constraint.h); errors name
// the file.
ByteDfa load_grammar_file(const std::string& path);

// "15043+1.5", "15043-2", "15043=-inf" -> (15043, bias). Throws a clear error otherwise.
std::pair<int32_t, float> parse_logit_bias(const std::string& spec);

// The flags applied to `g` (sampling, stop strings, speculative options, the output
// constraint); a --draft model is loaded into `draft` (checked against the target's tokenizer).
void apply_generation_flags(const GenerationFlags& f, const Model& target, int threads,
                            GenerateOptions* g, std::unique_ptr<Model>* draft_model,
                            std::unique_ptr<DraftModel>* draft);

}  // namespace edgevl::app
