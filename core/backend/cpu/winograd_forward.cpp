// Winograd F(2x2,3x3), forward: the input transform B^T d B (also used by the
// weight gradient) and the output transform A^T m A with bias and relu.
// See winograd.cpp for the algebra and winograd_rows.h for the vectorisation.
#include <cstring>

#include "core/backend/cpu/winograd_rows.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

using namespace winograd;

void winogradInputTransform(const float* x, int64_t n, const Window2d& g, float* v, int64_t ldv,
                            int64_t plane) {
  const Dims d = dims(g);
  const int64_t channels = g.channels;
  // A ring of four split padded rows (padded row y in slot y % 4), so each
  // input row is split once although consecutive tile rows share two rows.
  alignas(32) float ev[4][kRowFloats], od[4][kRowFloats];
  std::memset(ev, 0, sizeof(ev));
  std::memset(od, 0, sizeof(od));
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      const float* src = x + (s * channels + c) * d.h * d.w;
      auto load_row = [&](int64_t y) {
        const int64_t iy = y - d.p;
        if (iy >= 0 && iy < d.h) {
          splitRow(src + iy * d.w, d.w, ev[y % 4], od[y % 4]);
        } else {
          std::memset(ev[y % 4], 0, sizeof(float) * d.used);
          std::memset(od[y % 4], 0, sizeof(float) * d.used);
        }
      };
      load_row(0);
      load_row(1);
      float* row_start = v + c * ldv;
      const float* row_end = row_start + n * d.t;  // this call's part of each (xi, c) row
      for (int64_t ti = 0; ti < d.th; ++ti) {
        load_row(2 * ti + 2);
        load_row(2 * ti + 3);
        float* dst = row_start + s * d.t + ti * d.tw;
        for (int64_t jc = 0; jc < d.tw; jc += 8) {
          V8 h[4][4];  // d B, row by row
          for (int a = 0; a < 4; ++a) {
            const int slot = static_cast<int>((2 * ti + a) % 4);
            const TileColumns t = tileColumns(ev[slot], od[slot], jc, d.q);
            h[a][0] = t.d0 - t.d2;
            h[a][1] = t.d1 + t.d2;
            h[a][2] = t.d2 - t.d1;
            h[a][3] = t.d1 - t.d3;
          }
          const int64_t valid = d.tw - jc;
          // Whether a whole vector would cross the row end is the same in every plane.
          const simd::Mask mask = simd::firstLanes(valid);
          const simd::Mask* exact = row_end - (dst + jc) < 8 ? &mask : nullptr;
          for (int b = 0; b < 4; ++b) {  // B^T (d B)
            float* p = dst + jc + b * plane;
            put(p, h[0][b] - h[2][b], exact);
            put(p + 4 * plane, h[1][b] + h[2][b], exact);
            put(p + 8 * plane, h[2][b] - h[1][b], exact);
            put(p + 12 * plane, h[1][b] - h[3][b], exact);
          }
        }
      }
    }
}

void winogradOutputTransform(const float* m, int64_t ldm, int64_t plane, int64_t n, int64_t filters,
                             const Window2d& g, const float* bias, bool relu, float* y) {
  const Dims d = dims(g);
  const float* y_end = y + n * filters * d.ho * d.wo;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t f = 0; f < filters; ++f) {
      float* yp = y + (s * filters + f) * d.ho * d.wo;
      const V8 b = simd::broadcast(bias ? bias[f] : 0.0f);
      for (int64_t ti = 0; ti < d.th; ++ti) {
        const float* src = m + f * ldm + s * d.t + ti * d.tw;
        float* row0 = yp + 2 * ti * d.wo;
        const bool has_row1 = 2 * ti + 1 < d.ho;
        const bool exact = y_end - row0 < 2 * d.wo + 16;
        // Right to left: a chunk writes two output rows, so the partial last
        // chunk goes first and its spill into the next row is overwritten later.
        for (int64_t jc = (d.tw - 1) / 8 * 8; jc >= 0; jc -= 8) {
          // Lanes past the row's last tile are not read (m may end there).
          const simd::Mask mask = simd::firstLanes(d.tw - jc);
          const simd::Mask* partial = d.tw - jc < 8 ? &mask : nullptr;
          V8 t[2][4];  // A^T M
          for (int col = 0; col < 4; ++col) {
            const V8 m0 = get(src + (0 + col) * plane + jc, partial);
            const V8 m1 = get(src + (4 + col) * plane + jc, partial);
            const V8 m2 = get(src + (8 + col) * plane + jc, partial);
            const V8 m3 = get(src + (12 + col) * plane + jc, partial);
            t[0][col] = m0 + m1 + m2;
            t[1][col] = m1 - m2 - m3;
          }
          for (int r = 0; r < 2; ++r) {  // (A^T M) A
            if (r == 1 && !has_row1) break;
            V8 y0 = t[r][0] + t[r][1] + t[r][2] + b;
            V8 y1 = t[r][1] - t[r][2] - t[r][3] + b;
            if (relu) {
              y0 = simd::max0(y0);
              y1 = simd::max0(y1);
            }
            V8 lo, hi;
            simd::interleave(y0, y1, lo, hi);
            float* dst = row0 + r * d.wo + 2 * jc;
            const int64_t left = d.wo - 2 * jc;
            if (exact) {
              simd::storeN(dst, lo, left);
              simd::storeN(dst + 8, hi, left - 8);
            } else {
              simd::store(dst, lo);
              if (left > 8) simd::store(dst + 8, hi);
            }
          }
        }
      }
    }
}

}  // namespace dtrain::ops
