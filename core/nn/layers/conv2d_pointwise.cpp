// Conv2d's pointwise algorithm: a 1x1 stride-1 unpadded kernel over a small
// output plane, as one product over the whole batch. Per sample, the products
// of a 6x6 or 3x3 plane have an inner (weight gradient) or outer (forward,
// input gradient) dimension of 36 or 9, and OpenBLAS spends more time packing
// and re-reading the filters-x-channels result than multiplying. Copying the
// samples' planes side by side ([C][n*p] from [n][C][p]) costs one pass over
// each operand and turns every product into one with a dimension of n*p.
#include <cstring>

#include "core/backend/ops.h"
#include "core/nn/layers/conv2d.h"

namespace dtrain {

namespace {

// rows[r][s * p + t] = x[s][r][t]: n samples of [rows][p] side by side.
void samplesToRows(const float* x, int64_t n, int64_t rows, int64_t p, float* out) {
  const int64_t ld = n * p;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out + r * ld + s * p, x + (s * rows + r) * p, p * sizeof(float));
}

// The inverse: x[s][r][t] = rows[r][s * p + t].
void rowsToSamples(const float* in, int64_t n, int64_t rows, int64_t p, float* x) {
  const int64_t ld = n * p;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(x + (s * rows + r) * p, in + r * ld + s * p, p * sizeof(float));
}

// samplesToRows of dy with the fused relu's mask (y > 0) applied on the way.
void maskedSamplesToRows(const float* dy, const float* y, int64_t n, int64_t rows, int64_t p, float* out) {
  const int64_t ld = n * p;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t r = 0; r < rows; ++r) {
      const float* g = dy + (s * rows + r) * p;
      const float* o = y + (s * rows + r) * p;
      float* d = out + r * ld + s * p;
      for (int64_t t = 0; t < p; ++t) d[t] = o[t] > 0.0f ? g[t] : 0.0f;
    }
}

}  // namespace

void Conv2d::forwardPointwise(const float* x, int64_t n, float* y) {
  const int64_t f = config_.filters, k = geom_.channels, p = geom_.outPlane(), cols = n * p;
  float* xb = scratch().col.floats(k * cols);
  float* yb = scratch().masked.floats(f * cols);
  samplesToRows(x, n, k, p, xb);
  const float* bias = config_.bias ? bias_.data() : nullptr;
  if (unpacked_) {
    ops::gemmUnpacked(false, f, cols, k, weight_.data(), k, xb, cols, yb, cols, bias, relu_);
  } else {
    ops::gemm(false, false, f, cols, k, 1.0f, weight_.data(), k, xb, cols, 0.0f, yb, cols);
    if (bias || relu_) ops::biasActPlanes(yb, bias, f, cols, relu_);
  }
  rowsToSamples(yb, n, f, p, y);
}

void Conv2d::backwardPointwise(const float* x, const float* y, const float* dy, int64_t n, float* dx,
                               bool param_grads) {
  const int64_t f = config_.filters, k = geom_.channels, p = geom_.outPlane(), cols = n * p;
  float* xb = scratch().col.floats(k * cols);
  float* dyb = scratch().masked.floats(f * cols);
  if (relu_)
    maskedSamplesToRows(dy, y, n, f, p, dyb);
  else
    samplesToRows(dy, n, f, p, dyb);
  if (param_grads) {
    samplesToRows(x, n, k, p, xb);
    float* dbias = config_.bias ? dbias_.data() : nullptr;
    if (rows_weight_grad_) {
      ops::weightGradRows(dyb, nullptr, f, cols, xb, k, dweight_.data(), dbias);
    } else {
      ops::gemm(false, true, f, k, cols, 1.0f, dyb, cols, xb, cols, 1.0f, dweight_.data(), k);
      if (dbias) ops::biasGradPlanes(dyb, f, cols, dbias);
    }
  }
  if (!dx) return;
  // xb has served the weight gradient; it now takes the input gradient.
  if (unpacked_)
    ops::gemmUnpacked(true, k, cols, f, weight_.data(), k, dyb, cols, xb, cols);
  else
    ops::gemm(true, false, k, cols, f, 1.0f, weight_.data(), k, dyb, cols, 0.0f, xb, cols);
  rowsToSamples(xb, n, k, p, dx);
}

}  // namespace dtrain
