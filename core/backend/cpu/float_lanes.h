// Reductions of a float row on 16 independent lanes, so GCC vectorises them
// without reassociating anything it may not (no -ffast-math): for the
// softmax rows of attention and of the per-token loss, and layer norm's rows.
#pragma once
#include <algorithm>
#include <cstdint>

namespace dtrain::ops::lanes {

constexpr int64_t kLanes = 16;

// The largest of x[0..n), n >= 1.
inline float rowMax(const float* __restrict x, int64_t n) {
  float acc[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) acc[l] = x[0];
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] = acc[l] < x[j + l] ? x[j + l] : acc[l];
  for (; j < n; ++j) acc[0] = acc[0] < x[j] ? x[j] : acc[0];
  float m = acc[0];
  for (int64_t l = 1; l < kLanes; ++l) m = m < acc[l] ? acc[l] : m;
  return m;
}

// The sum of x[c] - shift over n values: float lanes over blocks of kBlock
// values (64 terms a lane at most, a row's tail spread over the lanes), the
// lanes and the blocks added in double. For rows up to kBlock long that is
// one float sum per lane; a vocabulary-long row keeps the same error per block.
constexpr int64_t kBlock = 1024;

inline double shiftedSum(const float* __restrict x, int64_t n, float shift) {
  double sum = 0.0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t end = std::min(n, b + kBlock);
    float acc[kLanes] = {};
    int64_t c = b;
    for (; c + kLanes <= end; c += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) acc[l] += x[c + l] - shift;
    for (int64_t l = 0; c + l < end; ++l) acc[l] += x[c + l] - shift;
    for (int64_t l = 0; l < kLanes; ++l) sum += acc[l];
  }
  return sum;
}

}  // namespace dtrain::ops::lanes
