#include "core/optim/grad_clip.h"

#include <cmath>

#include "core/optim/clip_rule.h"

namespace dtrain {

double sumOfSquares(const float* g, int64_t begin, int64_t end) {
  // Eight independent partial sums: a single running sum is a serial
  // dependency the compiler may not reorder (no -ffast-math), eight lanes
  // vectorise. The result depends only on the range, so it is deterministic.
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const double x = g[i + j];
      acc[j] += x * x;
    }
  }
  for (int j = 0; i < end; ++i, ++j) {
    const double x = g[i];
    acc[j] += x * x;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

float clipScale(double total_sum_of_squares, double max_norm) {
  return clip_rule::factor(total_sum_of_squares, max_norm);
}

void scale(float* g, int64_t begin, int64_t end, float s) {
  for (int64_t i = begin; i < end; ++i) g[i] *= s;
}

}  // namespace dtrain
