#include "runtime/token_constraint.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace edgevl {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
}  // namespace

TokenVocabulary::TokenVocabulary(const text::Tokenizer& t) {
  const auto t0 = Clock::now();
  const int32_t n = t.vocab_size();
  bytes_.resize(size_t(n));
  same_bytes_.assign(size_t(n), -1);
  std::fill(std::begin(single_), std::end(single_), -1);
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n; ++id) {
    using TT = text::TokenType;
    const TT type = t.token_type(id);
    // Special and control tokens end or frame a turn; they are never document text.
    if (t.is_special(id) || type == TT::Control || type == TT::Unknown || type == TT::Unused)
      continue;
    bytes_[size_t(id)] = t.token_bytes(id);
    if (bytes_[size_t(id)].empty()) continue;
    ids.push_back(id);
    if (bytes_[size_t(id)].size() == 1 && single_[uint8_t(bytes_[size_t(id)][0])] < 0)
      single_[uint8_t(bytes_[size_t(id)][0])] = id;
  }
  std::sort(ids.begin(), ids.end(),
            [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  // Sorted insertion: a node's matching child is always its most recently added one, so the
  // path of the previous token is a stack and siblings are appended at the end.
  nodes_.emplace_back();
  std::vector<int32_t> last_child(1, -1);
  std::vector<int32_t> path{0};  // path[d]: node at depth d of the previous token
  const std::string* prev = nullptr;
  for (const int32_t id : ids) {
    const std::string& b = bytes_[size_t(id)];
    size_t common = 0;
    if (prev)
      while (common < b.size() && common < prev->size() && b[common] == (*prev)[common]) ++common;
    path.resize(common + 1);
    for (size_t d = common; d < b.size(); ++d) {
      const auto child = int32_t(nodes_.size());
      Node node;
      node.byte = uint8_t(b[d]);
      nodes_.push_back(node);
      last_child.push_back(-1);
      const int32_t parent = path.back();
      if (last_child[size_t(parent)] < 0)
        nodes_[size_t(parent)].first_child = child;
      else
        nodes_[size_t(last_child[size_t(parent)])].next_sibling = child;
      last_child[size_t(parent)] = child;
      path.push_back(child);
    }
    Node& end = nodes_[size_t(path.back())];
    if (end.token < 0) {
      end.token = id;
    } else {  // identical bytes: chain behind the first
      int32_t k = end.token;
      while (same_bytes_[size_t(k)] >= 0) k = same_bytes_[size_t(k)];
      same_bytes_[size_t(k)] = id;
    }
    prev = &b;
  }
  build_ms_ = ms_since(t0);
}

size_t TokenVocabulary::memory_bytes() const {
  size_t b = nodes_.size() * sizeof(Node) + same_bytes_.size() * sizeof(int32_t);
  for (const auto& s : bytes_) b += sizeof(std::string) + (s.size() > 15 ? s.capacity() : 0);
  return b;
}

TokenConstraint::TokenConstraint(ByteDfa dfa, std::shared_ptr<const TokenVocabulary> vocab)
    : dfa_(std::move(dfa)), vocab_(std::move(vocab)) {
  const auto t0 = Clock::now();
  const auto ns = size_t(dfa_.num_states);
  const auto nc = size_t(dfa_.num_classes);
  has_out_.assign(ns, 0);
  // Reverse edges, then a BFS from the accepting states: each state's shortest byte
  // completion, as a tree (succ) so that completions of successive states are suffixes of
  // each other.
  std::vector<std::vector<std::pair<int32_t, uint8_t>>> rev(ns);
  for (size_t s = 1; s < ns; ++s)
    for (size_t c = 0; c < nc; ++c)
      if (const int32_t t = dfa_.next[s * nc + c]; t != 0) {
        has_out_[s] = 1;
        rev[size_t(t)].push_back({int32_t(s), uint8_t(c)});
      }
  // A class's byte for completions: one the vocabulary has as a single-byte token if any.
  std::vector<int> rep(nc, -1);
  for (int b = 0; b < 256; ++b) {
    const size_t c = dfa_.byte_class[size_t(b)];
    if (rep[c] < 0 ||
        (vocab_->single_byte(uint8_t(rep[c])) < 0 && vocab_->single_byte(uint8_t(b)) >= 0))
      rep[c] = b;
  }
  std::vector<int32_t> dist(ns, -1), succ(ns, 0);
  std::vector<uint8_t> succ_byte(ns, 0);
  std::vector<int32_t> queue;
  for (size_t s = 1; s < ns; ++s)
    if (dfa_.accepting[s]) {
      dist[s] = 0;
      queue.push_back(int32_t(s));
    }
  for (size_t qi = 0; qi < queue.size(); ++qi) {
    const int32_t x = queue[qi];
    for (const auto& [p, c] : rev[size_t(x)])
      if (dist[size_t(p)] < 0) {
        dist[size_t(p)] = dist[size_t(x)] + 1;
        succ[size_t(p)] = x;
        succ_byte[size_t(p)] = uint8_t(rep[c]);
        queue.push_back(p);
      }
  }
  // min_tokens: the fewest vocabulary tokens spelling the shortest completion (a DP over its
  // positions, each extended by walking the trie).
  min_tokens_.assign(ns, kUnreachable);
  const auto& nodes = vocab_->nodes();
  std::string w;
  std::vector<int32_t> best;
  for (size_t s = 1; s < ns; ++s) {
    if (dist[s] < 0) continue;
    w.clear();
    for (int32_t x = int32_t(s); dist[size_t(x)] > 0; x = succ[size_t(x)])
      w += char(succ_byte[size_t(x)]);
    best.assign(w.size() + 1, kUnreachable);
    best[w.size()] = 0;
    for (size_t i = w.size(); i-- > 0;) {
      int32_t node = 0;
      for (size_t j = i; j < w.size(); ++j) {
        int32_t c = nodes[size_t(node)].first_child;
        while (c >= 0 && nodes[size_t(c)].byte != uint8_t(w[j])) c = nodes[size_t(c)].next_sibling;
        if (c < 0) break;
        node = c;
        if (nodes[size_t(node)].token >= 0 && best[j + 1] != kUnreachable)
          best[i] = std::min(best[i], best[j + 1] + 1);
      }
    }
    min_tokens_[s] = best[0];
  }
  tables_.resize(ns);
  setup_ms_ = ms_since(t0);
}

int32_t TokenConstraint::advance(int32_t s, int32_t tok) const {
  if (s <= 0 || tok < 0 || tok >= vocab_->size()) return 0;
  const std::string& b = vocab_->bytes(tok);
  if (b.empty()) return 0;
  return dfa_.walk(s, b);
}

TokenConstraint::Table TokenConstraint::build_table(int32_t s) const {
  // Depth-first over the trie with the DFA state of each prefix; a dead state prunes the
  // whole subtree (every token below starts with a rejected prefix).
  const auto& nodes = vocab_->nodes();
  std::vector<std::pair<int32_t, int32_t>> found;  // (token, next state)
  std::vector<std::pair<int32_t, int32_t>> stack{{0, s}};
  while (!stack.empty()) {
    const auto [node, state] = stack.back();
    stack.pop_back();
    for (int32_t c = nodes[size_t(node)].first_child; c >= 0; c = nodes[size_t(c)].next_sibling) {
      const int32_t ns = dfa_.step(state, nodes[size_t(c)].byte);
      if (ns == 0) continue;
      for (int32_t t = nodes[size_t(c)].token; t >= 0; t = vocab_->same_bytes(t))
        if (min_tokens_[size_t(ns)] != kUnreachable) found.push_back({t, ns});
      if (nodes[size_t(c)].first_child >= 0) stack.push_back({c, ns});
    }
  }
  Table tb;
  int32_t max_u = 0;
  for (const auto& f : found) max_u = std::max(max_u, min_tokens_[size_t(f.second)]);
  std::vector<uint32_t> count(size_t(max_u) + 2, 0);
  for (const auto& f : found) ++count[size_t(min_tokens_[size_t(f.second)]) + 1];
  for (size_t k = 1; k < count.size(); ++k) count[k] += count[k - 1];
  tb.upto.assign(count.begin() + 1, count.end());
  // Counting sort by the next state's budget; ids ascending within each (found is unordered).
  std::sort(found.begin(), found.end());
  tb.tokens.resize(found.size());
  for (const auto& f : found) tb.tokens[count[size_t(min_tokens_[size_t(f.second)])]++] = f.first;
  return tb;
}

const TokenConstraint::Table& TokenConstraint::table(int32_t s) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = tables_[size_t(s)];
  if (!slot) {
    const auto t0 = Clock::now();
    slot = std::make_unique<Table>(build_table(s));
    tables_ms_ += ms_since(t0);
  }
  return *slot;
}

void TokenConstraint::mask(int32_t s, int32_t remaining, std::span<const float> logits,
                           std::vector<float>* out) const {
  out->assign(logits.size(), -INFINITY);
  if (s <= 0 || remaining <= 0) return;
  const Table& tb = table(s);
  if (tb.upto.empty()) return;
  const uint32_t n = tb.upto[std::min(size_t(remaining - 1), tb.upto.size() - 1)];
  float* o = out->data();
  for (uint32_t i = 0; i < n; ++i) {
    const auto t = size_t(tb.tokens[i]);
    if (t < logits.size()) o[t] = logits[t];
  }
}

std::vector<int32_t> TokenConstraint::allowed(int32_t s, int32_t remaining) const {
  std::vector<int32_t> r;
  if (s <= 0 || remaining <= 0) return r;
  const Table& tb = table(s);
  if (tb.upto.empty()) return r;
  const uint32_t n = tb.upto[std::min(size_t(remaining - 1), tb.upto.size() - 1)];
  r.assign(tb.tokens.begin(), tb.tokens.begin() + n);
  std::sort(r.begin(), r.end());
  return r;
}

void TokenConstraint::precompute_all() const {
  std::vector<uint8_t> seen(size_t(dfa_.num_states), 0);
  std::vector<int32_t> todo{dfa_.start};
  seen[size_t(dfa_.start)] = 1;
  while (!todo.empty()) {
    const int32_t s = todo.back();
    todo.pop_back();
    const Table& tb = table(s);
    for (const int32_t t : tb.tokens) {
      const int32_t ns = advance(s, t);
      if (!seen[size_t(ns)]) {
        seen[size_t(ns)] = 1;
        todo.push_back(ns);
      }
    }
  }
}

TokenConstraint::Stats TokenConstraint::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats st;
  st.nfa_states = dfa_.nfa_states;
  st.dfa_states = dfa_.num_states;
  st.byte_classes = dfa_.num_classes;
  st.dfa_bytes = dfa_.bytes();
  st.setup_ms = setup_ms_;
  st.tables_ms = tables_ms_;
  for (const auto& t : tables_)
    if (t) {
      ++st.cached_states;
      st.cache_bytes += sizeof(Table) + t->tokens.capacity() * sizeof(int32_t) +
                        t->upto.capacity() * sizeof(uint32_t);
    }
  return st;
}

}  // namespace edgevl
