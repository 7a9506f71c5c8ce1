#include "runtime/constraints/token_constraint.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "core/clock.h"
#include "core/error.h"

namespace edgevl {

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
    max_bytes_ = std::max(max_bytes_, int32_t(bytes_[size_t(id)].size()));
    if (bytes_[size_t(id)].size() == 1 && single_[uint8_t(bytes_[size_t(id)][0])] < 0)
      single_[uint8_t(bytes_[size_t(id)][0])] = id;
  }
  std::sort(ids.begin(), ids.end(),
            [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  // Sorted insertion creates the nodes in preorder: the previous token's path is a stack and
  // a new node is always the last child so far of its parent.
  byte_.push_back(0);
  parent_.push_back(-1);
  token_.push_back(-1);
  std::vector<int32_t> path{0};  // path[d]: node at depth d of the previous token
  const std::string* prev = nullptr;
  for (const int32_t id : ids) {
    const std::string& b = bytes_[size_t(id)];
    size_t common = 0;
    if (prev)
      while (common < b.size() && common < prev->size() && b[common] == (*prev)[common]) ++common;
    path.resize(common + 1);
    for (size_t d = common; d < b.size(); ++d) {
      byte_.push_back(uint8_t(b[d]));
      parent_.push_back(path.back());
      token_.push_back(-1);
      path.push_back(int32_t(byte_.size() - 1));
    }
    int32_t& at = token_[size_t(path.back())];
    if (at < 0) {
      at = id;
    } else {  // identical bytes: chain behind the first
      int32_t k = at;
      while (same_bytes_[size_t(k)] >= 0) k = same_bytes_[size_t(k)];
      same_bytes_[size_t(k)] = id;
    }
    prev = &b;
  }
  // Subtree ends: children come after their parent, so one backward pass.
  end_.resize(byte_.size());
  for (size_t i = byte_.size(); i-- > 0;) {
    end_[i] = std::max(end_[i], int32_t(i + 1));
    if (parent_[i] >= 0) end_[size_t(parent_[i])] = std::max(end_[size_t(parent_[i])], end_[i]);
  }
  build_ms_ = ms_since(t0);
}

int32_t TokenVocabulary::child(int32_t n, uint8_t b) const {
  // Children of n: n + 1, then each sibling starts where the previous one's subtree ends.
  for (int32_t c = n + 1; c < end_[size_t(n)]; c = end_[size_t(c)])
    if (byte_[size_t(c)] == b) return c;
  return -1;
}

size_t TokenVocabulary::memory_bytes() const {
  size_t b = byte_.size() * (1 + 3 * sizeof(int32_t)) + same_bytes_.size() * sizeof(int32_t);
  for (const auto& s : bytes_) b += sizeof(std::string) + (s.size() > 15 ? s.capacity() : 0);
  return b;
}

TokenConstraint::TokenConstraint(ByteDfa dfa, std::shared_ptr<const TokenVocabulary> vocab,
                                 size_t cache_limit)
    : dfa_(std::move(dfa)), vocab_(std::move(vocab)), cache_limit_(cache_limit) {
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
  // min_tokens: the fewest vocabulary tokens spelling the shortest completion. The completion
  // of s minus its first k bytes is the completion of succ^k(s), so in BFS order (completions
  // shortest first) u(s) = min over tokens t spelling a prefix of it of 1 + u(succ^|t|(s)):
  // one trie walk per state, as deep as the longest token.
  min_tokens_.assign(ns, kUnreachable);
  const TokenVocabulary& v = *vocab_;
  for (const int32_t s : queue) {
    if (dist[size_t(s)] == 0) {
      min_tokens_[size_t(s)] = 0;
      continue;
    }
    int32_t best = kUnreachable, node = 0;
    for (int32_t x = s; dist[size_t(x)] > 0;) {
      node = v.child(node, succ_byte[size_t(x)]);
      if (node < 0) break;
      x = succ[size_t(x)];
      if (v.token(node) >= 0 && min_tokens_[size_t(x)] != kUnreachable)
        best = std::min(best, min_tokens_[size_t(x)] + 1);
    }
    min_tokens_[size_t(s)] = best;
  }
  share_tables(rev);
  tables_.resize(size_t(num_table_classes_));
  setup_ms_ = ms_since(t0);
}

void TokenConstraint::share_tables(
    const std::vector<std::vector<std::pair<int32_t, uint8_t>>>& rev) {
  // Moore's partition refinement, stopped after D = max_token_bytes rounds: after round k two
  // states share a class iff every byte string of length <= k takes them to states of equal
  // budget (the dead state counts as its own budget). After D rounds that covers every token,
  // so the trie walks from the two states find the same tokens with the same budgets: the
  // same table. A full refinement would separate every position of a bounded string by its
  // distance to the bound; the truncation is what lets them share.
  //
  // Only states with a successor that changed class last round can split, so each round
  // re-signs just those (the whole DFA only in the first round): a chain of thousands of
  // string positions costs a few states per round, not the whole DFA.
  const auto ns = size_t(dfa_.num_states);
  const auto nc = size_t(dfa_.num_classes);
  std::vector<int32_t>& cls = table_class_;
  cls.assign(ns, 0);
  std::vector<std::vector<int32_t>> members;
  std::vector<int32_t> pos(ns, 0);  // index of each state in its class's member list
  auto add_to = [&](int32_t s, int32_t c) {
    cls[size_t(s)] = c;
    pos[size_t(s)] = int32_t(members[size_t(c)].size());
    members[size_t(c)].push_back(s);
  };
  auto remove_from = [&](int32_t s) {
    auto& m = members[size_t(cls[size_t(s)])];
    const int32_t last = m.back();
    m[size_t(pos[size_t(s)])] = last;
    pos[size_t(last)] = pos[size_t(s)];
    m.pop_back();
  };
  {  // Round 0: the budget (and dead or not).
    std::unordered_map<int64_t, int32_t> by_budget;
    for (size_t s = 0; s < ns; ++s) {
      const int64_t key = s == 0 ? -1 : int64_t(min_tokens_[s]);
      const auto [it, fresh] = by_budget.emplace(key, int32_t(members.size()));
      if (fresh) members.emplace_back();
      add_to(int32_t(s), it->second);
    }
  }
  std::vector<int32_t> changed(ns);
  std::iota(changed.begin(), changed.end(), 0);
  std::vector<uint8_t> is_cand(ns, 0);
  std::vector<int32_t> cands, sig;
  auto sign = [&](int32_t s, int32_t* out) {
    for (size_t c = 0; c < nc; ++c) out[c] = cls[size_t(dfa_.next[size_t(s) * nc + c])];
  };
  for (int32_t round = 0; round < vocab_->max_token_bytes() && !changed.empty(); ++round) {
    cands.clear();
    for (const int32_t t : changed)
      for (const auto& [p, c] : rev[size_t(t)])
        if (!is_cand[size_t(p)]) {
          is_cand[size_t(p)] = 1;
          cands.push_back(p);
        }
    changed.clear();
    std::sort(cands.begin(), cands.end(),
              [&](int32_t a, int32_t b) { return cls[size_t(a)] < cls[size_t(b)]; });
    std::vector<int32_t> moved;  // applied after the round: signatures use last round's classes
    std::vector<int32_t> moved_to;
    for (size_t i = 0; i < cands.size();) {
      const int32_t c0 = cls[size_t(cands[i])];
      size_t j = i;
      while (j < cands.size() && cls[size_t(cands[j])] == c0) ++j;
      // Signatures of the candidates, and of one member that is not a candidate (all such
      // members still agree: their successors kept their classes). Those matching it stay.
      const size_t k = j - i;
      sig.resize((k + 1) * nc);
      for (size_t a = 0; a < k; ++a) sign(cands[i + a], &sig[a * nc]);
      int32_t* ref = nullptr;
      for (const int32_t m : members[size_t(c0)])
        if (!is_cand[size_t(m)]) {
          ref = &sig[k * nc];
          sign(m, ref);
          break;
        }
      // Group the candidates by signature (few per class: quadratic is fine); the group that
      // matches `ref` (or, with no reference, the first group) keeps the class.
      std::vector<int32_t> group(k, -1);
      std::vector<size_t> leaders;
      for (size_t a = 0; a < k; ++a) {
        const int32_t* sa = &sig[a * nc];
        if (ref && std::equal(sa, sa + nc, ref)) continue;  // stays
        for (size_t g = 0; g < leaders.size(); ++g)
          if (std::equal(sa, sa + nc, &sig[leaders[g] * nc])) {
            group[a] = int32_t(g);
            break;
          }
        if (group[a] < 0) {
          group[a] = int32_t(leaders.size());
          leaders.push_back(a);
        }
      }
      std::vector<int32_t> new_class(leaders.size(), -1);
      for (size_t g = ref ? 0 : 1; g < leaders.size(); ++g) {
        new_class[g] = int32_t(members.size());
        members.emplace_back();
      }
      for (size_t a = 0; a < k; ++a)
        if (group[a] >= 0 && new_class[size_t(group[a])] >= 0) {
          moved.push_back(cands[i + a]);
          moved_to.push_back(new_class[size_t(group[a])]);
        }
      i = j;
    }
    for (size_t a = 0; a < moved.size(); ++a) {
      remove_from(moved[a]);
      add_to(moved[a], moved_to[a]);
      changed.push_back(moved[a]);
    }
    for (const int32_t p : cands) is_cand[size_t(p)] = 0;
  }
  num_table_classes_ = int32_t(members.size());
}

int32_t TokenConstraint::advance(int32_t s, int32_t tok) const {
  if (s <= 0 || tok < 0 || tok >= vocab_->size()) return 0;
  const std::string& b = vocab_->bytes(tok);
  if (b.empty()) return 0;
  return dfa_.walk(s, b);
}

TokenConstraint::Table TokenConstraint::build_table(int32_t s) const {
  // The trie in preorder with the DFA state of each prefix; a dead state skips the whole
  // subtree (every token below starts with a rejected prefix).
  const TokenVocabulary& v = *vocab_;
  const int32_t n = v.num_nodes();
  // Every entry read is written first (a parent precedes its children): no zeroing.
  std::unique_ptr<int32_t[]> state(new int32_t[size_t(n)]);
  std::vector<std::pair<int32_t, int32_t>> found;  // (token, min_tokens of its next state)
  found.reserve(size_t(v.size()));
  state[0] = s;
  int32_t max_u = 0;
  for (int32_t i = 1; i < n;) {
    const int32_t ns = dfa_.step(state[size_t(v.parent(i))], v.byte(i));
    if (ns == 0) {
      i = v.end(i);
      continue;
    }
    state[size_t(i)] = ns;
    const int32_t u = min_tokens_[size_t(ns)];
    if (u != kUnreachable) {
      for (int32_t t = v.token(i); t >= 0; t = v.same_bytes(t)) found.push_back({t, u});
      max_u = std::max(max_u, u);
    }
    ++i;
  }
  Table tb;
  std::vector<uint32_t> count(size_t(max_u) + 2, 0);
  for (const auto& f : found) ++count[size_t(f.second) + 1];
  for (size_t k = 1; k < count.size(); ++k) count[k] += count[k - 1];
  tb.upto.assign(count.begin() + 1, count.end());
  // Counting sort by the next state's budget (stable: trie order within each).
  tb.tokens.resize(found.size());
  for (const auto& f : found) tb.tokens[count[size_t(f.second)]++] = f.first;
  if (found.size() > size_t(v.size()) / 2) {
    tb.complement = true;
    std::vector<uint8_t> in(size_t(v.size()), 0);
    for (const auto& f : found) in[size_t(f.first)] = 1;
    for (int32_t t = 0; t < v.size(); ++t)
      if (!in[size_t(t)]) tb.excluded.push_back(t);
  }
  return tb;
}

size_t TokenConstraint::table_bytes(const Table& t) {
  return sizeof(Table) + (t.tokens.capacity() + t.excluded.capacity()) * sizeof(int32_t) +
         t.upto.capacity() * sizeof(uint32_t);
}

std::shared_ptr<const TokenConstraint::Table> TokenConstraint::table(int32_t s) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = tables_[size_t(table_class_[size_t(s)])];
  if (!slot) {
    const auto t0 = Clock::now();
    auto built = std::make_shared<const Table>(build_table(s));
    const size_t bytes = table_bytes(*built);
    if (cache_bytes_ + bytes > cache_limit_) {
      for (auto& t : tables_) t.reset();
      cache_bytes_ = 0;
      ++evictions_;
    }
    slot = std::move(built);
    cache_bytes_ += bytes;
    tables_ms_ += ms_since(t0);
  }
  return slot;
}

void TokenConstraint::mask(int32_t s, int32_t remaining, std::span<const float> logits,
                           std::vector<float>* out) const {
  const std::shared_ptr<const Table> tb = s > 0 && remaining > 0 ? table(s) : nullptr;
  if (!tb || tb->upto.empty()) {
    out->assign(logits.size(), -INFINITY);
    return;
  }
  const uint32_t n = tb->upto[std::min(size_t(remaining - 1), tb->upto.size() - 1)];
  if (tb->complement) {
    out->assign(logits.begin(), logits.end());
    float* o = out->data();
    const size_t vocab = std::min(logits.size(), size_t(vocab_->size()));
    for (size_t t = vocab; t < logits.size(); ++t) o[t] = -INFINITY;  // padding rows
    for (const int32_t t : tb->excluded)
      if (size_t(t) < logits.size()) o[t] = -INFINITY;
    for (size_t i = n; i < tb->tokens.size(); ++i)  // allowed, but not within the budget
      if (size_t(tb->tokens[i]) < logits.size()) o[tb->tokens[i]] = -INFINITY;
    return;
  }
  out->assign(logits.size(), -INFINITY);
  float* o = out->data();
  for (uint32_t i = 0; i < n; ++i) {
    const auto t = size_t(tb->tokens[i]);
    if (t < logits.size()) o[t] = logits[t];
  }
}

std::vector<int32_t> TokenConstraint::allowed(int32_t s, int32_t remaining) const {
  std::vector<int32_t> r;
  if (s <= 0 || remaining <= 0) return r;
  const auto tb = table(s);
  if (tb->upto.empty()) return r;
  const uint32_t n = tb->upto[std::min(size_t(remaining - 1), tb->upto.size() - 1)];
  r.assign(tb->tokens.begin(), tb->tokens.begin() + n);
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
    const auto tb = table(s);
    for (const int32_t t : tb->tokens) {
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
  st.table_classes = num_table_classes_;
  st.dfa_bytes = dfa_.bytes();
  st.setup_ms = setup_ms_;
  st.tables_ms = tables_ms_;
  st.evictions = evictions_;
  st.cache_bytes = cache_bytes_;
  for (const auto& t : tables_) st.cached_states += t != nullptr;
  return st;
}

}  // namespace edgevl
