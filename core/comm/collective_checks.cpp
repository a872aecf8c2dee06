#include "core/comm/collective_checks.h"

#include <cstdint>

#include "core/errors.h"

namespace dtrain {

void checkElementCount(const char* operation, int64_t n) {
  if (n < 0)
    throw CommError(std::string(operation) + ": element count " + std::to_string(n) + " is negative");
}

void checkRootRank(const char* operation, int root, int size) {
  if (root < 0 || root >= size)
    throw CommError(std::string(operation) + ": root rank " + std::to_string(root) +
                    " is outside the group of " + std::to_string(size) + " ranks");
}

int64_t reduceScatterTotal(const std::vector<int64_t>& counts, int size) {
  if (counts.size() != static_cast<size_t>(size))
    throw CommError("reduce-scatter: " + std::to_string(counts.size()) + " counts given for a group of " +
                    std::to_string(size) + (size == 1 ? " rank" : " ranks") + " (one count per rank)");
  int64_t total = 0;
  for (int64_t count : counts) {
    checkElementCount("reduce-scatter", count);
    total += count;
  }
  return total;
}

std::string elementCountText(int64_t n, const std::string& units) {
  return std::to_string(n) + " " + (n == 1 ? units.substr(0, units.size() - 1) : units);
}

bool buffersOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bBytes && y < x + aBytes;
}

}  // namespace dtrain
