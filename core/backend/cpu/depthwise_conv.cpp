// Depthwise convolution: the entry points of depthwise_ops.h, which send the
// MobileNet geometries to the vectorised 3x3 paths, and the direct path for
// every other geometry: per output plane and tap, a multiply-add over the
// runs of outputs whose input lies inside the plane (padding never read).
#include <algorithm>
#include <cstring>

#include "core/backend/cpu/depthwise_kernels.h"
#include "core/backend/depthwise_ops.h"

namespace dtrain::ops {

using namespace depthwise;

namespace {

enum class Path { Stride1, Stride2, Direct };

Path pathFor(const Window2d& g) {
  if (g.kernel_h != 3 || g.kernel_w != 3 || g.pad_h != 1 || g.pad_w != 1 || g.stride_h != g.stride_w)
    return Path::Direct;
  if (g.stride_h == 1) return Path::Stride1;
  if (g.stride_h == 2) return Path::Stride2;
  return Path::Direct;
}

// The outputs [lo, hi) along one axis whose input o*stride - pad + tap lies in [0, in).
struct Run {
  int64_t lo, hi;
};
Run validRun(int64_t out, int64_t in, int64_t stride, int64_t pad, int64_t tap) {
  const int64_t a = pad - tap;       // o*stride >= a
  const int64_t b = in + pad - tap;  // o*stride < b
  int64_t lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  int64_t hi = b <= 0 ? 0 : std::min(out, (b + stride - 1) / stride);
  return {std::min(lo, hi), hi};
}

// Calls f(oy, iy, ox_run, ix0) for every filter tap (i, j) and valid output
// row, where input column ix = ox * stride_w + ix0 for ox in the run.
template <typename F>
void forEachTapRow(const Window2d& g, int64_t i, int64_t j, F f) {
  const Run rows = validRun(g.outHeight(), g.height, g.stride_h, g.pad_h, i);
  const Run cols = validRun(g.outWidth(), g.width, g.stride_w, g.pad_w, j);
  for (int64_t oy = rows.lo; oy < rows.hi; ++oy) f(oy, oy * g.stride_h - g.pad_h + i, cols, j - g.pad_w);
}

void forwardDirect(const float* x, int64_t n, const Window2d& g, int64_t m, const float* w, const float* bias,
                   bool relu, float* y) {
  const int64_t wo = g.outWidth(), out_size = g.outPlane(), in_size = g.inPlane();
  const int64_t area = g.kernel_h * g.kernel_w, sw = g.stride_w;
  for (int64_t p = 0; p < n * g.channels; ++p) {
    const float* xp = x + p * in_size;
    for (int64_t k = 0; k < m; ++k) {
      const int64_t filter = (p % g.channels) * m + k;
      float* yp = y + (p * m + k) * out_size;
      std::fill(yp, yp + out_size, bias ? bias[filter] : 0.0f);
      for (int64_t i = 0; i < g.kernel_h; ++i)
        for (int64_t j = 0; j < g.kernel_w; ++j) {
          const float wv = w[filter * area + i * g.kernel_w + j];
          forEachTapRow(g, i, j, [&](int64_t oy, int64_t iy, Run cols, int64_t ix0) {
            float* __restrict yr = yp + oy * wo;
            const float* xr = xp + iy * g.width;
            for (int64_t ox = cols.lo; ox < cols.hi; ++ox) yr[ox] += wv * xr[ox * sw + ix0];
          });
        }
      if (relu)
        for (int64_t q = 0; q < out_size; ++q) yp[q] = std::max(yp[q], 0.0f);
    }
  }
}

void backwardDirect(const float* x, const float* relu_out, const float* dy, int64_t n, const Window2d& g,
                    int64_t m, const float* w, float* dw, float* dbias, float* dx, float* masked) {
  const int64_t wo = g.outWidth(), out_size = g.outPlane(), in_size = g.inPlane();
  const int64_t area = g.kernel_h * g.kernel_w, sw = g.stride_w;
  for (int64_t p = 0; p < n * g.channels; ++p) {
    const float* xp = x + p * in_size;
    float* dxp = dx ? dx + p * in_size : nullptr;
    if (dxp) std::fill(dxp, dxp + in_size, 0.0f);
    for (int64_t k = 0; k < m; ++k) {
      const int64_t o = p * m + k, filter = (p % g.channels) * m + k;
      const float* d = dy + o * out_size;
      if (relu_out) {
        copyPadded(d, relu_out + o * out_size, out_size, masked);
        d = masked;
      }
      if (dbias) {
        float s = 0.0f;
        for (int64_t q = 0; q < out_size; ++q) s += d[q];
        dbias[filter] += s;
      }
      for (int64_t i = 0; i < g.kernel_h; ++i)
        for (int64_t j = 0; j < g.kernel_w; ++j) {
          const int64_t t = filter * area + i * g.kernel_w + j;
          const float wv = w[t];
          float s = 0.0f;
          forEachTapRow(g, i, j, [&](int64_t oy, int64_t iy, Run cols, int64_t ix0) {
            const float* dr = d + oy * wo;
            const float* xr = xp + iy * g.width;
            for (int64_t ox = cols.lo; ox < cols.hi; ++ox) s += dr[ox] * xr[ox * sw + ix0];
            if (!dxp) return;
            float* xg = dxp + iy * g.width;
            for (int64_t ox = cols.lo; ox < cols.hi; ++ox) xg[ox * sw + ix0] += wv * dr[ox];
          });
          dw[t] += s;
        }
    }
  }
}

}  // namespace

bool depthwiseVectorised(const Window2d& g) { return pathFor(g) != Path::Direct; }

int64_t depthwiseScratchFloats(const Window2d& g) {
  switch (pathFor(g)) {
    case Path::Stride1:
      return stride1ScratchFloats(g);
    case Path::Stride2:
      return stride2ScratchFloats(g);
    case Path::Direct:
      break;
  }
  return roundUp8(g.outPlane());  // one masked dy plane
}

void depthwiseForward(const float* x, int64_t n, const Window2d& g, int64_t multiplier, const float* w,
                      const float* bias, bool relu, float* y, float* scratch) {
  switch (pathFor(g)) {
    case Path::Stride1:
      return forwardStride1(x, n, g, multiplier, w, bias, relu, y, scratch);
    case Path::Stride2:
      return forwardStride2(x, n, g, multiplier, w, bias, relu, y, scratch);
    case Path::Direct:
      return forwardDirect(x, n, g, multiplier, w, bias, relu, y);
  }
}

void depthwiseBackward(const float* x, const float* relu_out, const float* dy, int64_t n, const Window2d& g,
                       int64_t multiplier, const float* w, float* dw, float* dbias, float* dx,
                       float* scratch) {
  switch (pathFor(g)) {
    case Path::Stride1:
      return backwardStride1(x, relu_out, dy, n, g, multiplier, w, dw, dbias, dx, scratch);
    case Path::Stride2:
      return backwardStride2(x, relu_out, dy, n, g, multiplier, w, dw, dbias, dx, scratch);
    case Path::Direct:
      return backwardDirect(x, relu_out, dy, n, g, multiplier, w, dw, dbias, dx, scratch);
  }
}

}  // namespace dtrain::ops
