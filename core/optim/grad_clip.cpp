#include "core/optim/grad_clip.h"

#include <cmath>

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
  if (max_norm <= 0.0) return 1.0f;
  const double norm = std::sqrt(total_sum_of_squares);
  const double coef = max_norm / (norm + 1e-6);
  // Not std::min: it would turn a NaN coefficient into 1 and hide the NaN.
  return static_cast<float>(coef < 1.0 || std::isnan(coef) ? coef : 1.0);
}

void scale(float* g, int64_t begin, int64_t end, float s) {
  for (int64_t i = begin; i < end; ++i) g[i] *= s;
}

}  // namespace dtrain
