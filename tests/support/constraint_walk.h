#pragma once
// A generation held to an output constraint, driven by uniformly random logits instead of a
// model: every allowed token has a chance (a random-weight model's distributions are peaked),
// so walks reach the corners of a schema's or a grammar's language. Shared by the JSON-schema
// and the grammar tests.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/constraints/token_constraint.h"

namespace edgevl::test {

struct ConstraintWalk {
  std::string text;
  int32_t state = 0;   // the constraint's state at the end
  int32_t tokens = 0;  // tokens taken (the stop token not counted)
  int32_t steps = 0;   // masks computed
  double mask_ms = 0;  // time in mask(), first-visit tables included
  std::string error;   // empty unless a step found no allowed token or left the language
};

// Up to `budget` tokens; a stop token (`eos`) competes only where the document may end, and
// ends the walk when drawn. `logits` / `masked` are the caller's buffers (vocabulary-sized).
inline ConstraintWalk walk_constraint(const TokenConstraint& c, int32_t eos, int32_t budget,
                                      std::mt19937& rng, std::vector<float>& logits,
                                      std::vector<float>& masked) {
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  ConstraintWalk w;
  w.state = c.start();
  for (int32_t left = budget; left > 0 && !c.complete(w.state); --left) {
    for (auto& l : logits) l = u(rng);
    const auto m0 = std::chrono::steady_clock::now();
    c.mask(w.state, left, logits, &masked);
    w.mask_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m0).count();
    ++w.steps;
    if (c.accepting(w.state)) masked[size_t(eos)] = logits[size_t(eos)];
    const auto best = int32_t(std::max_element(masked.begin(), masked.end()) - masked.begin());
    if (!(masked[size_t(best)] > -INFINITY)) {
      w.error = "no allowed token after: " + w.text;
      return w;
    }
    if (best == eos) break;
    w.text += c.vocabulary().bytes(best);
    ++w.tokens;
    w.state = c.advance(w.state, best);
    if (w.state == 0) {
      w.error = "an allowed token left the language: " + w.text;
      return w;
    }
  }
  return w;
}

}  // namespace edgevl::test
