// The element-wise sum of several arrays, added in one fixed order, for the
// shared-memory group: out[i] = ((in[0][i] + in[1][i]) + in[2][i]) + ... for
// every i. Whoever computes it gets bitwise the same result, which is what
// lets each rank sum its own part of a chunk and all ranks agree.
#pragma once
#include <cstdint>

namespace dtrain {

// `count` >= 1 arrays of `n` elements; `out` may not overlap them.
void sumInOrder(const float* const* inputs, int count, float* out, int64_t n);
void sumInOrder(const double* const* inputs, int count, double* out, int64_t n);

}  // namespace dtrain
