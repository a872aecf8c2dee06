// "Did you mean" suggestions for misspelt keys, sections and enumerated values.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// The candidate closest to `word`: within an edit distance of 2 (a swap of two
// neighbouring letters counts as one edit), or one a prefix of the other.
// Returns "" when nothing is close enough to be a useful hint.
std::string closestMatch(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace dtrain
