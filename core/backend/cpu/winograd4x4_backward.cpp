// Winograd F(4x4,3x3), backward: the output-gradient transform A dY A^T
// (shared by the weight and input gradients) and the input-gradient transform
// B dv B^T, which adds overlapping tiles. See winograd4x4.cpp for the algebra
// and winograd4x4_rows.h for the vectorisation; the store policy is
// winograd_rows.h's.
#include <cstring>

#include "core/backend/cpu/winograd4x4_rows.h"
#include "core/backend/cpu/winograd_rows.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

using namespace winograd4;
using winograd::get;
using winograd::put;

void winograd4x4GradOutputTransform(const float* dy, const float* relu_out, int64_t n, int64_t filters,
                                    const Window2d& g, float* z, int64_t ldz, int64_t plane) {
  const Dims d = dims(g);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t f = 0; f < filters; ++f) {
      const int64_t src = (s * filters + f) * d.ho * d.wo;
      float* row_start = z + f * ldz;
      const float* row_end = row_start + n * d.t;
      for (int64_t ti = 0; ti < d.th; ++ti) {
        float* dst = row_start + s * d.t + ti * d.tw;
        for (int64_t jc = 0; jc < d.tw; jc += 8) {
          // The row's columns [4jc, wo) as four vectors, masked past wo.
          const int64_t left = d.wo - 4 * jc;
          simd::Mask masks[4];
          const simd::Mask* part[4];
          for (int k = 0; k < 4; ++k) {
            masks[k] = simd::firstLanes(left - 8 * k);
            part[k] = left < 8 * k + 8 ? &masks[k] : nullptr;
          }
          V8 t[4][6];  // dY A^T, row by row
          for (int r = 0; r < 4; ++r) {
            const int64_t oy = 4 * ti + r;
            V8 gv[4];  // dy at output row oy, column 4(jc + lane) + k
            if (oy >= d.ho) {
              for (V8& e : gv) e = simd::zero();
            } else {
              const int64_t at = src + oy * d.wo + 4 * jc;
              V8 raw[4];
              for (int k = 0; k < 4; ++k) {
                raw[k] = get(dy + at + 8 * k, part[k]);
                if (relu_out) raw[k] = simd::wherePositive(get(relu_out + at + 8 * k, part[k]), raw[k]);
              }
              splitPhases(raw[0], raw[1], raw[2], raw[3], gv);
            }
            gradOutputRows(gv, t[r]);
          }
          const simd::Mask mask = simd::firstLanes(d.tw - jc);
          const simd::Mask* exact = row_end - (dst + jc) < 8 ? &mask : nullptr;
          for (int b = 0; b < 6; ++b) {  // A (dY A^T)
            const V8 column[4] = {t[0][b], t[1][b], t[2][b], t[3][b]};
            V8 out[6];
            gradOutputRows(column, out);
            for (int a = 0; a < 6; ++a) put(dst + jc + (6 * a + b) * plane, out[a], exact);
          }
        }
      }
    }
}

void winograd4x4GradInputTransform(const float* dv, int64_t ldv, int64_t plane, int64_t n, const Window2d& g,
                                   float* dx) {
  const Dims d = dims(g);
  const int64_t channels = g.channels;
  // A ring of eight split padded-row accumulators: padded row y lives in slot
  // y % 8. Tile row ti adds to rows 4ti..4ti+5; after it, rows 4ti..4ti+3
  // are complete and are written out.
  alignas(32) float acc[8][kSplitFloats];
  std::memset(acc, 0, sizeof(acc));
  auto emit = [&](float* dxp, int64_t y) {
    const int64_t iy = y - d.p;
    float* split = acc[y % 8];
    if (iy >= 0 && iy < d.h) emitRow(split, d, dxp + iy * d.w);
    for (int k = 0; k < 4; ++k) std::memset(split + k * kPhaseFloats, 0, sizeof(float) * d.used);
  };
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      float* dxp = dx + (s * channels + c) * d.h * d.w;
      for (int64_t ti = 0; ti < d.th; ++ti) {
        const float* src = dv + c * ldv + s * d.t + ti * d.tw;
        // Tile j adds its columns 4 and 5 to P0[j+1] and P1[j+1]: those
        // vectors are shifted up one lane, the top lane carried into the next chunk.
        V8 carry0[6], carry1[6];
        for (int a = 0; a < 6; ++a) carry0[a] = carry1[a] = simd::zero();
        int64_t jc = 0;
        for (; jc < d.tw; jc += 8) {
          // Lanes past the row's last tile load as zero and add nothing.
          const simd::Mask mask = simd::firstLanes(d.tw - jc);
          const simd::Mask* partial = d.tw - jc < 8 ? &mask : nullptr;
          V8 r[6][6];  // B dv
          for (int b = 0; b < 6; ++b) {
            V8 column[6], out[6];
            for (int a = 0; a < 6; ++a) column[a] = get(src + (6 * a + b) * plane + jc, partial);
            gradInputRows(column, out);
            for (int a = 0; a < 6; ++a) r[a][b] = out[a];
          }
          for (int a = 0; a < 6; ++a) {  // (B dv) B^T, added to padded row 4ti+a
            V8 h[6];
            gradInputRows(r[a], h);
            float* split = acc[(4 * ti + a) % 8] + jc;
            float* p0 = split;
            float* p1 = split + kPhaseFloats;
            float* p2 = split + 2 * kPhaseFloats;
            float* p3 = split + 3 * kPhaseFloats;
            simd::store(p0, simd::load(p0) + h[0] + simd::shiftUp(h[4], carry0[a]));
            simd::store(p1, simd::load(p1) + h[1] + simd::shiftUp(h[5], carry1[a]));
            simd::store(p2, simd::load(p2) + h[2]);
            simd::store(p3, simd::load(p3) + h[3]);
            carry0[a] = h[4];
            carry1[a] = h[5];
          }
        }
        for (int a = 0; a < 6; ++a) {  // the last tile's carry
          float* split = acc[(4 * ti + a) % 8] + jc;
          simd::store(split, simd::load(split) + simd::shiftUp(simd::zero(), carry0[a]));
          float* p1 = split + kPhaseFloats;
          simd::store(p1, simd::load(p1) + simd::shiftUp(simd::zero(), carry1[a]));
        }
        for (int64_t y = 4 * ti; y < 4 * ti + 4; ++y) emit(dxp, y);
      }
      emit(dxp, 4 * d.th);
      emit(dxp, 4 * d.th + 1);
    }
}

}  // namespace dtrain::ops
