#include "core/config/suggest.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace dtrain {
namespace {

std::string lower(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Optimal-string-alignment distance: typos are mostly insertions, deletions,
// substitutions and swapped neighbours, and each of those should cost one edit.
size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

bool startsWith(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

std::string closestMatch(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string w = lower(word);
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  std::string best_prefix;
  size_t best_prefix_gap = std::numeric_limits<size_t>::max();
  for (const std::string& candidate : candidates) {
    const std::string c = lower(candidate);
    if (c == w) return candidate;
    size_t distance = editDistance(w, c);
    // A distance as long as the word itself means every letter changed: no hint.
    if (distance <= 2 && distance < w.size() && distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
    // A one-letter prefix matches too much to be a hint.
    const std::string& shorter = c.size() < w.size() ? c : w;
    if (shorter.size() >= 2 && (startsWith(c, w) || startsWith(w, c))) {
      size_t gap = c.size() > w.size() ? c.size() - w.size() : w.size() - c.size();
      if (gap < best_prefix_gap) {
        best_prefix = candidate;
        best_prefix_gap = gap;
      }
    }
  }
  return best.empty() ? best_prefix : best;
}

}  // namespace dtrain
