// Conv2d's im2col algorithm: per sample, im2col then one product, so the
// col matrix stays in cache between the two.
#include "core/backend/ops.h"
#include "core/nn/layers/conv2d.h"

namespace dtrain {

// Per sample, so the col matrix (C*kh*kw x Ho*Wo) stays in cache between
// im2col and the gemm, and the output plane is still cached for the bias pass.
void Conv2d::forwardIm2col(const float* x, int64_t n, float* y) {
  const int64_t f = config_.filters, k = geom_.channels * geom_.kernel_h * geom_.kernel_w;
  const int64_t p = geom_.outPlane(), in_size = geom_.channels * geom_.inPlane();
  float* col = pointwise_ ? nullptr : scratch().col.floats(k * p);
  for (int64_t s = 0; s < n; ++s) {
    const float* xs = x + s * in_size;
    float* ys = y + s * f * p;
    if (!pointwise_) ops::im2col(xs, geom_, col);
    const float* bias = config_.bias ? bias_.data() : nullptr;
    if (unpacked_) {  // bias and relu applied in registers
      ops::gemmUnpacked(false, f, p, k, weight_.data(), k, pointwise_ ? xs : col, p, ys, p, bias, relu_);
    } else {
      ops::gemm(false, false, f, p, k, 1.0f, weight_.data(), k, pointwise_ ? xs : col, p, 0.0f, ys, p);
      if (bias || relu_) ops::biasActPlanes(ys, bias, f, p, relu_);
    }
  }
}

const float* Conv2d::weightGradient(const float* dy, const float* y, const float* cols, int64_t filters,
                                    int64_t k, int64_t p, float* dw, float* dbias, float* masked) {
  if (rows_weight_grad_) {
    // dW += dY col^T and the bias sums in one pass, the relu mask applied on the fly.
    ops::weightGradRows(dy, relu_ ? y : nullptr, filters, p, cols, k, dw, dbias);
    if (!relu_ || !masked) return dy;
    ops::reluBackward(y, dy, masked, filters * p);
    return masked;
  }
  if (relu_) {
    ops::reluBackward(y, dy, masked, filters * p);
    dy = masked;
  }
  ops::gemm(false, true, filters, k, p, 1.0f, dy, p, cols, p, 1.0f, dw, k);
  if (dbias) ops::biasGradPlanes(dy, filters, p, dbias);
  return dy;
}

void Conv2d::backwardIm2col(const float* x, const float* y, const float* dy, int64_t n, float* dx,
                            bool param_grads) {
  const int64_t f = config_.filters, k = geom_.channels * geom_.kernel_h * geom_.kernel_w;
  const int64_t p = geom_.outPlane(), in_size = geom_.channels * geom_.inPlane();
  float* col = pointwise_ ? nullptr : scratch().col.floats(k * p);
  float* masked = relu_ && (dx || !rows_weight_grad_) ? scratch().masked.floats(f * p) : nullptr;
  float* dbias = config_.bias ? dbias_.data() : nullptr;
  for (int64_t s = 0; s < n; ++s) {
    const float* xs = x + s * in_size;
    const float* dys = dy + s * f * p;
    if (param_grads) {
      // col is recomputed: cheaper than keeping a batch of them.
      if (!pointwise_) ops::im2col(xs, geom_, col);
      const float* cols = pointwise_ ? xs : col;
      dys = weightGradient(dys, y + s * f * p, cols, f, k, p, dweight_.data(), dbias, masked);
    } else if (relu_) {
      ops::reluBackward(y + s * f * p, dys, masked, f * p);
      dys = masked;
    }
    if (!dx) continue;  // the network input needs no gradient: skip a third of the work
    float* dxs = dx + s * in_size;
    // dcol = W^T dY, then col2im; a pointwise kernel's dcol is dx itself.
    if (unpacked_)
      ops::gemmUnpacked(true, k, p, f, weight_.data(), k, dys, p, pointwise_ ? dxs : col, p);
    else
      ops::gemm(true, false, k, p, f, 1.0f, weight_.data(), k, dys, p, 0.0f, pointwise_ ? dxs : col, p);
    if (!pointwise_) ops::col2im(col, geom_, dxs);
  }
}

}  // namespace dtrain
