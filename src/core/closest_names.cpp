#include "core/closest_names.h"

#include <algorithm>

namespace edgevl {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> closest_names(const std::string& s, const std::vector<std::string>& names,
                                       size_t n) {
  std::vector<std::pair<size_t, std::string>> d;
  for (const auto& name : names) d.emplace_back(edit_distance(s, name), name);
  std::sort(d.begin(), d.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < std::min(n, d.size()); ++i) out.push_back(d[i].second);
  return out;
}

}  // namespace edgevl
