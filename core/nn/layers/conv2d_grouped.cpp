// Conv2d with groups > 1. Group g reads input channels [g*C/G, (g+1)*C/G)
// and owns filters [g*F/G, (g+1)*F/G), whose weights are contiguous in
// [F, C/G, kh, kw]; so each group is an ordinary convolution on a slice.
//   im2col     per sample and group: im2col of the group's channels and one
//              product with its filters, as conv2d_im2col.cpp does for the
//              whole input (same unpacked/packed choice, per group).
//   depthwise  groups = C: a product per group would be a 1-row matrix, so
//              whole batches go to the direct kernel of depthwise_ops.h.
#include "core/backend/depthwise_ops.h"
#include "core/backend/ops.h"
#include "core/nn/layers/conv2d.h"

namespace dtrain {

namespace {

ops::Window2d groupWindow(const ops::Window2d& g, int64_t groups) {
  ops::Window2d w = g;
  w.channels = g.channels / groups;
  return w;
}

}  // namespace

void Conv2d::forwardGrouped(const float* x, int64_t n, float* y) {
  const ops::Window2d gw = groupWindow(geom_, config_.groups);
  const int64_t groups = config_.groups, f = config_.filters, fg = f / groups;
  const int64_t k = gw.channels * gw.kernel_h * gw.kernel_w, p = geom_.outPlane();
  const int64_t in_size = geom_.channels * geom_.inPlane(), group_in = gw.channels * geom_.inPlane();
  float* col = pointwise_ ? nullptr : scratch().col.floats(k * p);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* xs = x + s * in_size + gi * group_in;
      float* ys = y + (s * f + gi * fg) * p;
      const float* w = weight_.data() + gi * fg * k;
      const float* bias = config_.bias ? bias_.data() + gi * fg : nullptr;
      if (!pointwise_) ops::im2col(xs, gw, col);
      const float* cols = pointwise_ ? xs : col;
      if (unpacked_) {
        ops::gemmUnpacked(false, fg, p, k, w, k, cols, p, ys, p, bias, relu_);
      } else {
        ops::gemm(false, false, fg, p, k, 1.0f, w, k, cols, p, 0.0f, ys, p);
        if (bias || relu_) ops::biasActPlanes(ys, bias, fg, p, relu_);
      }
    }
}

void Conv2d::backwardGrouped(const float* x, const float* y, const float* dy, int64_t n, float* dx,
                             bool param_grads) {
  const ops::Window2d gw = groupWindow(geom_, config_.groups);
  const int64_t groups = config_.groups, f = config_.filters, fg = f / groups;
  const int64_t k = gw.channels * gw.kernel_h * gw.kernel_w, p = geom_.outPlane();
  const int64_t in_size = geom_.channels * geom_.inPlane(), group_in = gw.channels * geom_.inPlane();
  float* col = pointwise_ ? nullptr : scratch().col.floats(k * p);
  // One group's dY masked by the fused relu, where a product needs it.
  float* masked = relu_ && (dx || !rows_weight_grad_) ? scratch().masked.floats(fg * p) : nullptr;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* xs = x + s * in_size + gi * group_in;
      const int64_t out_offset = (s * f + gi * fg) * p;
      const float* w = weight_.data() + gi * fg * k;
      float* dw = dweight_.data() + gi * fg * k;
      float* dbias = config_.bias ? dbias_.data() + gi * fg : nullptr;
      const float* dys = dy + out_offset;
      if (param_grads) {
        if (!pointwise_) ops::im2col(xs, gw, col);
        const float* cols = pointwise_ ? xs : col;
        dys = weightGradient(dys, y + out_offset, cols, fg, k, p, dw, dbias, masked);
      } else if (relu_) {
        ops::reluBackward(y + out_offset, dys, masked, fg * p);
        dys = masked;
      }
      if (!dx) continue;
      float* dxs = dx + s * in_size + gi * group_in;
      // dcol = W_g^T dY_g, then col2im into the group's channels.
      if (unpacked_)
        ops::gemmUnpacked(true, k, p, fg, w, k, dys, p, pointwise_ ? dxs : col, p);
      else
        ops::gemm(true, false, k, p, fg, 1.0f, w, k, dys, p, 0.0f, pointwise_ ? dxs : col, p);
      if (!pointwise_) ops::col2im(col, gw, dxs);
    }
}

void Conv2d::forwardDepthwise(const float* x, int64_t n, float* y) {
  float* work = scratch().col.floats(ops::depthwiseScratchFloats(geom_));
  ops::depthwiseForward(x, n, geom_, config_.filters / geom_.channels, weight_.data(),
                        config_.bias ? bias_.data() : nullptr, relu_, y, work);
}

void Conv2d::backwardDepthwise(const float* x, const float* y, const float* dy, int64_t n, float* dx) {
  float* work = scratch().col.floats(ops::depthwiseScratchFloats(geom_));
  ops::depthwiseBackward(x, relu_ ? y : nullptr, dy, n, geom_, config_.filters / geom_.channels,
                         weight_.data(), dweight_.data(), config_.bias ? dbias_.data() : nullptr, dx, work);
}

}  // namespace dtrain
