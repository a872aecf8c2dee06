// Bias addition fused with the optional relu, and the bias gradient. These are
// memory-bound passes, so the activation rides along with the bias instead of
// costing a pass of its own.
#include <algorithm>

#include "core/backend/ops.h"

namespace dtrain::ops {

void biasActRows(float* y, const float* bias, int64_t rows, int64_t cols, bool relu) {
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict row = y + r * cols;
    if (bias && relu) {
      for (int64_t c = 0; c < cols; ++c) row[c] = std::max(row[c] + bias[c], 0.0f);
    } else if (bias) {
      for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
    } else if (relu) {
      for (int64_t c = 0; c < cols; ++c) row[c] = std::max(row[c], 0.0f);
    }
  }
}

void biasActPlanes(float* y, const float* bias, int64_t planes, int64_t plane, bool relu) {
  for (int64_t p = 0; p < planes; ++p) {
    float* __restrict v = y + p * plane;
    const float b = bias ? bias[p] : 0.0f;
    if (relu) {
      for (int64_t i = 0; i < plane; ++i) v[i] = std::max(v[i] + b, 0.0f);
    } else if (bias) {
      for (int64_t i = 0; i < plane; ++i) v[i] += b;
    }
  }
}

void biasGradRows(const float* dy, int64_t rows, int64_t cols, float* dbias) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict row = dy + r * cols;
    float* __restrict db = dbias;
    for (int64_t c = 0; c < cols; ++c) db[c] += row[c];
  }
}

void biasGradPlanes(const float* dy, int64_t planes, int64_t plane, float* dbias) {
  for (int64_t p = 0; p < planes; ++p) {
    const float* __restrict v = dy + p * plane;
    // Eight partial sums let the compiler vectorise the reduction without
    // reassociating (no -ffast-math).
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= plane; i += 8)
      for (int k = 0; k < 8; ++k) acc[k] += v[i + k];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < plane; ++i) s += v[i];
    dbias[p] += s;
  }
}

void reluForward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}

void reluBackward(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace dtrain::ops
