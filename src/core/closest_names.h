#pragma once
// "Did you mean" for names a user typed: tensor names in --overrides, subcommands and flags.
#include <string>
#include <vector>

namespace edgevl {

// Levenshtein distance (insertions, deletions, substitutions of bytes).
size_t edit_distance(const std::string& a, const std::string& b);

// Up to `n` names nearest to `s` by edit distance, nearest first (ties by name).
std::vector<std::string> closest_names(const std::string& s, const std::vector<std::string>& names,
                                       size_t n = 5);

}  // namespace edgevl
