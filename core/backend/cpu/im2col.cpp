// im2col / col2im for one sample. Each col row (c, i, j) is the input plane c
// shifted by the kernel offset (i, j) and sampled with the stride, so a row is
// built from contiguous runs (memcpy for stride 1) with zeros where the window
// hangs over the padding.
#include <cstring>

#include "core/backend/ops.h"

namespace dtrain::ops {

namespace {

// The output columns ox whose input column ox*stride - pad + j lies inside
// [0, width): [lo, hi).
inline void validRange(int64_t out, int64_t in, int64_t stride, int64_t pad, int64_t j, int64_t& lo,
                       int64_t& hi) {
  // ox*stride >= pad - j  and  ox*stride < in + pad - j
  int64_t a = pad - j;
  lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  int64_t b = in + pad - j;  // exclusive bound on ox*stride
  hi = b <= 0 ? 0 : (b + stride - 1) / stride;
  if (hi > out) hi = out;
  if (lo > hi) lo = hi;
}

}  // namespace

void im2col(const float* x, const Window2d& g, float* col) {
  const int64_t ho = g.outHeight(), wo = g.outWidth();
  for (int64_t c = 0; c < g.channels; ++c) {
    const float* plane = x + c * g.inPlane();
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        int64_t lo, hi;
        validRange(wo, g.width, g.stride_w, g.pad_w, j, lo, hi);
        for (int64_t oy = 0; oy < ho; ++oy, col += wo) {
          const int64_t iy = oy * g.stride_h - g.pad_h + i;
          if (iy < 0 || iy >= g.height) {
            std::memset(col, 0, sizeof(float) * wo);
            continue;
          }
          for (int64_t ox = 0; ox < lo; ++ox) col[ox] = 0.0f;
          // Index arithmetic, not pointer arithmetic: base may be negative.
          const int64_t base = iy * g.width - g.pad_w + j;
          if (g.stride_w == 1) {
            std::memcpy(col + lo, plane + base + lo, sizeof(float) * (hi - lo));
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) col[ox] = plane[base + ox * g.stride_w];
          }
          for (int64_t ox = hi; ox < wo; ++ox) col[ox] = 0.0f;
        }
      }
    }
  }
}

void col2im(const float* col, const Window2d& g, float* dx) {
  const int64_t ho = g.outHeight(), wo = g.outWidth();
  std::memset(dx, 0, sizeof(float) * g.channels * g.inPlane());
  for (int64_t c = 0; c < g.channels; ++c) {
    float* plane = dx + c * g.inPlane();
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        int64_t lo, hi;
        validRange(wo, g.width, g.stride_w, g.pad_w, j, lo, hi);
        for (int64_t oy = 0; oy < ho; ++oy, col += wo) {
          const int64_t iy = oy * g.stride_h - g.pad_h + i;
          if (iy < 0 || iy >= g.height) continue;
          const int64_t base = iy * g.width - g.pad_w + j;
          if (g.stride_w == 1) {
            float* __restrict d = plane + base + lo;
            const float* __restrict s = col + lo;
            for (int64_t k = 0; k < hi - lo; ++k) d[k] += s[k];
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) plane[base + ox * g.stride_w] += col[ox];
          }
        }
      }
    }
  }
}

}  // namespace dtrain::ops
