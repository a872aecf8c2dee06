// Winograd F(4x4,3x3), forward: the input transform B^T d B (also used by the
// weight gradient) and the output transform A^T m A with bias and relu.
// See winograd4x4.cpp for the algebra and winograd4x4_rows.h for the
// vectorisation; the store policy is winograd_rows.h's.
#include <algorithm>
#include <cstring>

#include "core/backend/cpu/winograd4x4_rows.h"
#include "core/backend/cpu/winograd_rows.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

using namespace winograd4;
using winograd::get;
using winograd::put;

void winograd4x4InputTransform(const float* x, int64_t n, const Window2d& g, float* v, int64_t ldv,
                               int64_t plane) {
  const Dims d = dims(g);
  const int64_t channels = g.channels;
  // A ring of eight split padded rows (padded row y in slot y % 8), so each
  // input row is split once although consecutive tile rows share two rows.
  alignas(32) float split[8][kSplitFloats];
  std::memset(split, 0, sizeof(split));
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      const float* src = x + (s * channels + c) * d.h * d.w;
      auto load_row = [&](int64_t y) {
        const int64_t iy = y - d.p;
        splitRow(iy >= 0 && iy < d.h ? src + iy * d.w : nullptr, d, split[y % 8]);
      };
      load_row(0);
      load_row(1);
      float* row_start = v + c * ldv;
      const float* row_end = row_start + n * d.t;  // this call's part of each (xi, c) row
      for (int64_t ti = 0; ti < d.th; ++ti) {
        for (int64_t y = 4 * ti + 2; y < 4 * ti + 6; ++y) load_row(y);
        float* dst = row_start + s * d.t + ti * d.tw;
        for (int64_t jc = 0; jc < d.tw; jc += 8) {
          V8 h[6][6];  // d B, row by row
          for (int a = 0; a < 6; ++a) {
            V8 col[6];
            tileColumns(split[(4 * ti + a) % 8], jc, col);
            inputRows(col, h[a]);
          }
          // Whether a whole vector would cross the row end is the same in every plane.
          const simd::Mask mask = simd::firstLanes(d.tw - jc);
          const simd::Mask* exact = row_end - (dst + jc) < 8 ? &mask : nullptr;
          for (int b = 0; b < 6; ++b) {  // B^T (d B)
            const V8 column[6] = {h[0][b], h[1][b], h[2][b], h[3][b], h[4][b], h[5][b]};
            V8 out[6];
            inputRows(column, out);
            for (int a = 0; a < 6; ++a) put(dst + jc + (6 * a + b) * plane, out[a], exact);
          }
        }
      }
    }
}

void winograd4x4OutputTransform(const float* m, int64_t ldm, int64_t plane, int64_t n, int64_t filters,
                                const Window2d& g, const float* bias, bool relu, float* y) {
  const Dims d = dims(g);
  const float* y_end = y + n * filters * d.ho * d.wo;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t f = 0; f < filters; ++f) {
      float* yp = y + (s * filters + f) * d.ho * d.wo;
      const V8 b = simd::broadcast(bias ? bias[f] : 0.0f);
      for (int64_t ti = 0; ti < d.th; ++ti) {
        const float* src = m + f * ldm + s * d.t + ti * d.tw;
        float* row0 = yp + 4 * ti * d.wo;
        const int64_t rows = std::min<int64_t>(4, d.ho - 4 * ti);
        const bool exact = y_end - row0 < 4 * d.wo + 32;
        // Right to left: a chunk writes four output rows, so the partial last
        // chunk goes first and its spill into the next row is overwritten later.
        for (int64_t jc = (d.tw - 1) / 8 * 8; jc >= 0; jc -= 8) {
          // Lanes past the row's last tile are not read (m may end there).
          const simd::Mask mask = simd::firstLanes(d.tw - jc);
          const simd::Mask* partial = d.tw - jc < 8 ? &mask : nullptr;
          V8 t[4][6];  // A^T M
          for (int col = 0; col < 6; ++col) {
            V8 mv[6], out[4];
            for (int a = 0; a < 6; ++a) mv[a] = get(src + (6 * a + col) * plane + jc, partial);
            outputRows(mv, out);
            for (int r = 0; r < 4; ++r) t[r][col] = out[r];
          }
          const int64_t left = d.wo - 4 * jc;
          for (int r = 0; r < rows; ++r) {  // (A^T M) A
            V8 yv[4], out[4];
            outputRows(t[r], yv);
            for (int k = 0; k < 4; ++k) {
              yv[k] = yv[k] + b;
              if (relu) yv[k] = simd::max0(yv[k]);
            }
            mergePhases(yv, out);
            float* dst = row0 + r * d.wo + 4 * jc;
            for (int k = 0; k < 4; ++k) {
              if (exact)
                simd::storeN(dst + 8 * k, out[k], left - 8 * k);
              else if (left > 8 * k)
                simd::store(dst + 8 * k, out[k]);
            }
          }
        }
      }
    }
}

}  // namespace dtrain::ops
