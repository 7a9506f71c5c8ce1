#pragma once
// A byte-level DFA (runtime/constraints/json_constraint.h) lifted to a model's tokens: which tokens
// may come next from a state, and the state after each, so that a generation can be held to the
// DFA's language one sampled token at a time.
//
// - The vocabulary's ordinary tokens (never special, control or unused ones) are a trie of
//   their byte strings; a state's allowed tokens are found by walking the trie and the DFA
//   together, pruning every branch the DFA rejects. Tables are built at a state's first
//   visit and kept, up to a cache limit (precompute_all() builds every reachable one up front).
// - Budget: min_tokens(s) is an upper bound on the tokens needed from s to an accepting state:
//   the fewest tokens that spell s's shortest byte completion (along a fixed BFS tree of
//   shortest completions). With R tokens left a token is allowed only when its next state has
//   min_tokens <= R - 1. The first token of that spelling always qualifies, so once
//   min_tokens(start) <= n a generation of at most n tokens can always end in a complete
//   document: the automaton closes open strings, arrays and objects in time.
// - Shared tables: a state's table depends only on what each token's bytes do from it (leave
//   the language, or reach a state of some budget). States that agree on that for every byte
//   string up to the longest token share one table. A string with a large maxLength has a
//   state per character position, but every position farther than a token from its bounds
//   behaves alike: one table serves them all instead of one new table per generated token.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "runtime/constraints/json_constraint.h"
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

  // The trie in preorder (children in byte order); node 0 is the root. A node's subtree is
  // [i, end(i)), so a walk skips a rejected prefix's subtree in one step and otherwise reads
  // the arrays front to back.
  int32_t num_nodes() const { return int32_t(byte_.size()); }
  uint8_t byte(int32_t n) const { return byte_[size_t(n)]; }
  int32_t parent(int32_t n) const { return parent_[size_t(n)]; }
  int32_t end(int32_t n) const { return end_[size_t(n)]; }
  int32_t token(int32_t n) const { return token_[size_t(n)]; }  // spelled here, or -1
  // The child of `n` for byte `b`, or -1.
  int32_t child(int32_t n, uint8_t b) const;
  int32_t same_bytes(int32_t id) const { return same_bytes_[size_t(id)]; }
  // A token of exactly this one byte, or -1.
  int32_t single_byte(uint8_t b) const { return single_[b]; }
  // The longest token's bytes: how far a table's trie walk can look ahead of its state.
  int32_t max_token_bytes() const { return max_bytes_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<uint8_t> byte_;
  std::vector<int32_t> parent_, end_, token_;
  std::vector<int32_t> same_bytes_;  // next token with identical bytes, or -1
  int32_t single_[256];
  int32_t max_bytes_ = 0;
  double build_ms_ = 0;
};

class TokenConstraint {
 public:
  // Bounded strings make a state per character position, each with a table of most of the
  // vocabulary (~0.5 MB over 151k tokens): past this many bytes the cache starts over.
  static constexpr size_t kCacheLimit = size_t(256) << 20;

  TokenConstraint(ByteDfa dfa, std::shared_ptr<const TokenVocabulary> vocab,
                  size_t cache_limit = kCacheLimit);

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
    int32_t dfa_states = 0, byte_classes = 0;
    int32_t table_classes = 0;  // distinct tables the states map to
    int32_t cached_states = 0;  // tables built and cached now
    size_t dfa_bytes = 0, cache_bytes = 0;
    double setup_ms = 0;    // budgets (min_tokens of every state)
    double tables_ms = 0;   // token tables built so far
    int64_t evictions = 0;  // times the cache passed cache_limit and was emptied
  };
  Stats stats() const;

 private:
  // Tokens allowed from a state, ascending by the min_tokens of their next state; upto[k] =
  // how many of them lead to a state finishing in <= k tokens. When most of the vocabulary is
  // allowed (inside a string), `excluded` lists the tokens not in `tokens`: masking then copies
  // the logits and bans the few rather than scattering the many.
  struct Table {
    std::vector<int32_t> tokens;
    std::vector<uint32_t> upto;
    std::vector<int32_t> excluded;
    bool complement = false;
  };
  // Shared, so that a table survives an eviction while a caller still reads it.
  std::shared_ptr<const Table> table(int32_t s) const;
  // table_class_[s]: which shared table serves state s (see the header comment).
  void share_tables(const std::vector<std::vector<std::pair<int32_t, uint8_t>>>& rev);
  static size_t table_bytes(const Table& t);
  Table build_table(int32_t s) const;

  ByteDfa dfa_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<int32_t> min_tokens_;
  std::vector<uint8_t> has_out_;
  std::vector<int32_t> table_class_;
  int32_t num_table_classes_ = 0;
  double setup_ms_ = 0;
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<const Table>> tables_;  // per table class
  mutable double tables_ms_ = 0;
  size_t cache_limit_;
  mutable size_t cache_bytes_ = 0;
  mutable int64_t evictions_ = 0;
};

}  // namespace edgevl
