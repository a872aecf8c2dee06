// Argument checks and message pieces shared by the process groups (Gloo,
// shared memory, single process), so every implementation refuses the same
// calls with the same words.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

// Throws CommError "<operation>: element count -3 is negative".
void checkElementCount(const char* operation, int64_t n);
// Throws CommError when root is not a rank of a group of `size` (size > 1).
void checkRootRank(const char* operation, int root, int size);
// Checks reduce-scatter's counts (one per rank, none negative); returns their sum.
int64_t reduceScatterTotal(const std::vector<int64_t>& counts, int size);
// "1 float", "1001 floats" (units is the plural).
std::string elementCountText(int64_t n, const std::string& units);
// Whether the byte ranges [a, a + aBytes) and [b, b + bBytes) share a byte.
bool buffersOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes);

}  // namespace dtrain
