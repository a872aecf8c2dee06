#include "core/backend/sequence_ops.h"

#include <cmath>

namespace dtrain::ops {

void layerNormForward(const float* x, int64_t rows, int64_t cols, const float* gamma, const float* beta,
                      float eps, float* y, float* mean, float* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    float* __restrict yr = y + r * cols;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += xr[c];
    const double mu = sum / static_cast<double>(cols);
    double sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double d = xr[c] - mu;
      sq += d * d;
    }
    const float m = static_cast<float>(mu);
    const float s = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(cols) + eps));
    mean[r] = m;
    rstd[r] = s;
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * s * gamma[c] + beta[c];
  }
}

void layerNormBackward(const float* x, const float* dy, int64_t rows, int64_t cols, const float* gamma,
                       const float* mean, const float* rstd, float* dx, float* dgamma, float* dbeta) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    const float* __restrict dyr = dy + r * cols;
    const float m = mean[r], s = rstd[r];
    double g_sum = 0.0, gx_sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - m) * s;
      const float g = dyr[c] * gamma[c];
      g_sum += g;
      gx_sum += static_cast<double>(g) * xhat;
      dgamma[c] += dyr[c] * xhat;
      dbeta[c] += dyr[c];
    }
    if (!dx) continue;
    const float g_mean = static_cast<float>(g_sum / static_cast<double>(cols));
    const float gx_mean = static_cast<float>(gx_sum / static_cast<double>(cols));
    float* __restrict dxr = dx + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - m) * s;
      dxr[c] = s * (dyr[c] * gamma[c] - g_mean - xhat * gx_mean);
    }
  }
}

namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

}  // namespace

void geluForward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kGeluK * (v + kGeluC * v * v * v)));
  }
}

void geluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kGeluK * (v + kGeluC * v * v * v));
    const float inner = kGeluK * (1.0f + 3.0f * kGeluC * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * inner);
  }
}

int64_t embeddingForward(const float* ids, int64_t tokens, const float* table, int64_t rows, int64_t dim,
                         float* y) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float id = ids[t];
    // The negation catches NaN too.
    if (!(id >= 0.0f && id < static_cast<float>(rows)) || id != std::floor(id)) return t;
    const float* __restrict src = table + static_cast<int64_t>(id) * dim;
    float* __restrict dst = y + t * dim;
    for (int64_t c = 0; c < dim; ++c) dst[c] = src[c];
  }
  return -1;
}

void embeddingBackward(const float* ids, int64_t tokens, const float* dy, int64_t dim, float* dtable) {
  for (int64_t t = 0; t < tokens; ++t) {
    float* __restrict dst = dtable + static_cast<int64_t>(ids[t]) * dim;
    const float* __restrict src = dy + t * dim;
    for (int64_t c = 0; c < dim; ++c) dst[c] += src[c];
  }
}

}  // namespace dtrain::ops
