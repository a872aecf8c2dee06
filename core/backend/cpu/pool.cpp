// Max and average pooling, NCHW, one (sample, channel) plane at a time so each
// plane stays in L1 while it is read or written. Windows are clipped to the
// input; padding never wins a max and counts as zero in an average.
#include <cmath>
#include <cstring>

#include "core/backend/cpu/pool_2x2.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

namespace {

// The input rows (or columns) [lo, hi) covered by window position o.
inline void windowSpan(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t in, int64_t& lo,
                       int64_t& hi) {
  const int64_t start = o * stride - pad;
  lo = start < 0 ? 0 : start;
  hi = start + kernel < in ? start + kernel : in;
}

// Max of a 2x2 window at stride 2 without padding, when no vectorised
// version is built (see pool_2x2.h).
void maxPool2x2Plane(const float* __restrict x, int64_t w, int64_t ho, int64_t wo, float* __restrict y,
                     int32_t* __restrict idx) {
  for (int64_t oy = 0; oy < ho; ++oy) {
    const float* r0 = x + 2 * oy * w;
    const float* r1 = r0 + w;
    const int32_t base = static_cast<int32_t>(2 * oy * w);
    for (int64_t ox = 0; ox < wo; ++ox) {
      float best = r0[2 * ox];
      int32_t at = base + static_cast<int32_t>(2 * ox);
      // Scan order (0,0) (0,1) (1,0) (1,1); a later element wins only when
      // strictly greater (first maximum on ties) or NaN (NaN propagates).
      float v = r0[2 * ox + 1];
      bool t = v > best || std::isnan(v);
      best = t ? v : best;
      at = t ? base + static_cast<int32_t>(2 * ox + 1) : at;
      v = r1[2 * ox];
      t = v > best || std::isnan(v);
      best = t ? v : best;
      at = t ? base + static_cast<int32_t>(w + 2 * ox) : at;
      v = r1[2 * ox + 1];
      t = v > best || std::isnan(v);
      best = t ? v : best;
      at = t ? base + static_cast<int32_t>(w + 2 * ox + 1) : at;
      y[oy * wo + ox] = best;
      if (idx) idx[oy * wo + ox] = at;
    }
  }
}

}  // namespace

void maxPoolForward(const float* x, int64_t n, const Window2d& g, float* y, int32_t* argmax) {
  const int64_t ho = g.outHeight(), wo = g.outWidth(), planes = n * g.channels;
  const bool fast = g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 &&
                    g.pad_h == 0 && g.pad_w == 0;
  if (fast && detail::maxPool2x2Forward(x, planes, g.height, g.width, y, argmax)) return;
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * g.inPlane();
    float* yp = y + p * ho * wo;
    int32_t* ip = argmax ? argmax + p * ho * wo : nullptr;
    if (fast) {
      maxPool2x2Plane(xp, g.width, ho, wo, yp, ip);
      continue;
    }
    for (int64_t oy = 0; oy < ho; ++oy) {
      int64_t y0, y1;
      windowSpan(oy, g.stride_h, g.pad_h, g.kernel_h, g.height, y0, y1);
      for (int64_t ox = 0; ox < wo; ++ox) {
        int64_t x0, x1;
        windowSpan(ox, g.stride_w, g.pad_w, g.kernel_w, g.width, x0, x1);
        float best = xp[y0 * g.width + x0];
        int64_t at = y0 * g.width + x0;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            const float v = xp[iy * g.width + ix];
            if (v > best || (std::isnan(v) && !std::isnan(best))) {
              best = v;
              at = iy * g.width + ix;
            }
          }
        yp[oy * wo + ox] = best;
        if (ip) ip[oy * wo + ox] = static_cast<int32_t>(at);
      }
    }
  }
}

void maxPoolBackward(const float* dy, const int32_t* argmax, int64_t n, const Window2d& g, float* dx) {
  const int64_t out = g.outPlane(), planes = n * g.channels;
  const bool fast = g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 &&
                    g.pad_h == 0 && g.pad_w == 0;
  if (fast && detail::maxPool2x2Backward(dy, argmax, planes, g.height, g.width, dx)) return;
  for (int64_t p = 0; p < planes; ++p) {
    float* dxp = dx + p * g.inPlane();
    const float* dyp = dy + p * out;
    const int32_t* ip = argmax + p * out;
    std::memset(dxp, 0, sizeof(float) * g.inPlane());
    for (int64_t o = 0; o < out; ++o) dxp[ip[o]] += dyp[o];
  }
}

void avgPoolForward(const float* x, int64_t n, const Window2d& g, float* y) {
  const int64_t ho = g.outHeight(), wo = g.outWidth(), planes = n * g.channels;
  const float scale = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * g.inPlane();
    float* yp = y + p * ho * wo;
    for (int64_t oy = 0; oy < ho; ++oy) {
      int64_t y0, y1;
      windowSpan(oy, g.stride_h, g.pad_h, g.kernel_h, g.height, y0, y1);
      for (int64_t ox = 0; ox < wo; ++ox) {
        int64_t x0, x1;
        windowSpan(ox, g.stride_w, g.pad_w, g.kernel_w, g.width, x0, x1);
        float s = 0.0f;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) s += xp[iy * g.width + ix];
        yp[oy * wo + ox] = s * scale;
      }
    }
  }
}

void avgPoolBackward(const float* dy, int64_t n, const Window2d& g, float* dx) {
  const int64_t ho = g.outHeight(), wo = g.outWidth(), planes = n * g.channels;
  const float scale = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
  for (int64_t p = 0; p < planes; ++p) {
    float* dxp = dx + p * g.inPlane();
    const float* dyp = dy + p * ho * wo;
    std::memset(dxp, 0, sizeof(float) * g.inPlane());
    for (int64_t oy = 0; oy < ho; ++oy) {
      int64_t y0, y1;
      windowSpan(oy, g.stride_h, g.pad_h, g.kernel_h, g.height, y0, y1);
      for (int64_t ox = 0; ox < wo; ++ox) {
        int64_t x0, x1;
        windowSpan(ox, g.stride_w, g.pad_w, g.kernel_w, g.width, x0, x1);
        const float v = dyp[oy * wo + ox] * scale;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) dxp[iy * g.width + ix] += v;
      }
    }
  }
}

}  // namespace dtrain::ops
