#pragma once
// A byte-level DFA (runtime/json_constraint.h) lifted to a model's tokens: which tokens may
// come next from a state, and the state after each, so that a generation can be held to the
// DFA's language one sampled token at a time.
//
// - The vocabulary's ordinary tokens (never special, control or unused ones) are a trie of
//   their byte strings; a state's allowed tokens are found by walking the trie and the DFA
//   together, pruning every branch the DFA rejects. Tables are built at a state's first
//   visit and kept (precompute_all() builds every reachable one up front).
// - Budget: min_tokens(s) is an upper bound on the tokens needed from s to an accepting state:
//   the fewest tokens that spell s's shortest byte completion (along a fixed BFS tree of
//   shortest completions). With R tokens left a token is allowed only when its next state has
//   min_tokens <= R - 1. The first token of that spelling always qualifies, so once
//   min_tokens(start) <= n a generation of at most n tokens can always end in a complete
//   document: the automaton closes open strings, arrays and objects in time.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "runtime/json_constraint.h"
#include "text/tokenizer.h"

namespace edgevl {

class TokenVocabulary {
 public:
  explicit TokenVocabulary(const text::Tokenizer& t);
  int32_t size() const { return int32_t(bytes_.size()); }
  // The token's bytes; empty for a token that constrained text never uses.
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  size_t memory_bytes() const;
  double build_ms() const { return build_ms_; }

  struct Node {
    int32_t first_child = -1, next_sibling = -1;
    int32_t token = -1;  // a token spelled by the path to this node (others: same_bytes)
    uint8_t byte = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }  // [0] is the root
  int32_t same_bytes(int32_t id) const { return same_bytes_[size_t(id)]; }
  // A token of exactly this one byte, or -1.
  int32_t single_byte(uint8_t b) const { return single_[b]; }

 private:
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> same_bytes_;  // next token with identical bytes, or -1
  int32_t single_[256];
  double build_ms_ = 0;
};

class TokenConstraint {
 public:
  TokenConstraint(ByteDfa dfa, std::shared_ptr<const TokenVocabulary> vocab);

  int32_t start() const { return dfa_.start; }
  bool accepting(int32_t s) const { return dfa_.accepting[size_t(s)] != 0; }
  // Accepting and nothing can follow: the document is finished.
  bool complete(int32_t s) const { return accepting(s) && !has_out_[size_t(s)]; }
  static constexpr int32_t kUnreachable = INT32_MAX;
  int32_t min_tokens(int32_t s) const { return min_tokens_[size_t(s)]; }
  // The state after token `tok` from `s`; 0 when the token is not allowed there.
  int32_t advance(int32_t s, int32_t tok) const;
  // `out` = `logits` with every token set to -inf except those allowed from `s` when
  // `remaining` tokens (this one included) are left. Stop tokens are the caller's business.
  void mask(int32_t s, int32_t remaining, std::span<const float> logits,
            std::vector<float>* out) const;
  // The tokens mask() keeps, ascending by id (tests).
  std::vector<int32_t> allowed(int32_t s, int32_t remaining) const;
  // Builds the token table of every state reachable from the start (instead of lazily).
  void precompute_all() const;

  const ByteDfa& dfa() const { return dfa_; }
  const TokenVocabulary& vocabulary() const { return *vocab_; }

  struct Stats {
    int64_t nfa_states = 0;
    int32_t dfa_states = 0, byte_classes = 0, cached_states = 0;
    size_t dfa_bytes = 0, cache_bytes = 0;
    double setup_ms = 0;   // budgets (min_tokens of every state)
    double tables_ms = 0;  // token tables built so far
  };
  Stats stats() const;

 private:
  // Tokens allowed from a state, ascending by the min_tokens of their next state; upto[k] =
  // how many of them lead to a state finishing in <= k tokens.
  struct Table {
    std::vector<int32_t> tokens;
    std::vector<uint32_t> upto;
  };
  const Table& table(int32_t s) const;
  Table build_table(int32_t s) const;

  ByteDfa dfa_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<int32_t> min_tokens_;
  std::vector<uint8_t> has_out_;
  double setup_ms_ = 0;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Table>> tables_;
  mutable double tables_ms_ = 0;
};

}  // namespace edgevl
