// Reductions of a float row on 16 independent lanes, so GCC vectorises them
// without reassociating anything it may not (no -ffast-math): for the
// softmax rows of attention and of the per-token loss.
#pragma once
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

}  // namespace dtrain::ops::lanes
