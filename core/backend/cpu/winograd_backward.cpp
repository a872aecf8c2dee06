// Winograd F(2x2,3x3), backward: the output-gradient transform A dY A^T
// (shared by the weight and input gradients) and the input-gradient transform
// B dv B^T, which adds overlapping tiles. See winograd.cpp for the algebra and
// winograd_rows.h for the vectorisation.
#include <cstring>

#include "core/backend/cpu/winograd_rows.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

using namespace winograd;

void winogradGradOutputTransform(const float* dy, const float* relu_out, int64_t n, int64_t filters,
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
          // The row's columns [2jc, wo) as two vectors, masked past wo.
          const int64_t left = d.wo - 2 * jc;
          const simd::Mask mask_lo = simd::firstLanes(left), mask_hi = simd::firstLanes(left - 8);
          const simd::Mask* part_lo = left < 8 ? &mask_lo : nullptr;
          const simd::Mask* part_hi = left < 16 ? &mask_hi : nullptr;
          // gv[r][c]: dy at output row 2ti+r, column 2(jc+lane)+c.
          V8 gv[2][2];
          for (int r = 0; r < 2; ++r) {
            const int64_t oy = 2 * ti + r;
            if (oy >= d.ho) {
              gv[r][0] = gv[r][1] = simd::zero();
              continue;
            }
            const int64_t at = src + oy * d.wo + 2 * jc;
            V8 lo = get(dy + at, part_lo), hi = get(dy + at + 8, part_hi);
            if (relu_out) {
              lo = simd::wherePositive(get(relu_out + at, part_lo), lo);
              hi = simd::wherePositive(get(relu_out + at + 8, part_hi), hi);
            }
            simd::deinterleave(lo, hi, gv[r][0], gv[r][1]);
          }
          V8 t[4][2];  // A g
          for (int c = 0; c < 2; ++c) {
            t[0][c] = gv[0][c];
            t[1][c] = gv[0][c] + gv[1][c];
            t[2][c] = gv[0][c] - gv[1][c];
            t[3][c] = -gv[1][c];
          }
          const int64_t valid = d.tw - jc;
          const simd::Mask mask = simd::firstLanes(valid);
          const simd::Mask* exact = row_end - (dst + jc) < 8 ? &mask : nullptr;
          for (int a = 0; a < 4; ++a) {  // (A g) A^T
            float* p = dst + jc + 4 * a * plane;
            put(p, t[a][0], exact);
            put(p + plane, t[a][0] + t[a][1], exact);
            put(p + 2 * plane, t[a][0] - t[a][1], exact);
            put(p + 3 * plane, -t[a][1], exact);
          }
        }
      }
    }
}

void winogradGradInputTransform(const float* dv, int64_t ldv, int64_t plane, int64_t n, const Window2d& g,
                                float* dx) {
  const Dims d = dims(g);
  const int64_t channels = g.channels;
  const float* dx_end = dx + n * channels * d.h * d.w;
  // A ring of four padded-row accumulators (even and odd columns): padded row
  // y lives in slot y % 4. Tile row ti adds to rows 2ti..2ti+3; after it,
  // rows 2ti and 2ti+1 are complete and are written out.
  alignas(32) float e[4][kRowFloats], o[4][kRowFloats];
  std::memset(e, 0, sizeof(e));
  std::memset(o, 0, sizeof(o));
  auto emit = [&](float* dxp, int64_t y) {
    const int64_t iy = y - d.p;
    if (iy >= 0 && iy < d.h) emitRow(e[y % 4], o[y % 4], d.w, d.q, dxp + iy * d.w, dx_end);
    std::memset(e[y % 4], 0, sizeof(float) * d.used);
    std::memset(o[y % 4], 0, sizeof(float) * d.used);
  };
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      float* dxp = dx + (s * channels + c) * d.h * d.w;
      for (int64_t ti = 0; ti < d.th; ++ti) {
        const float* src = dv + c * ldv + s * d.t + ti * d.tw;
        // Tile j adds its columns 2 and 3 to E[j+1] and O[j+1]: those vectors
        // are shifted up one lane, the top lane carried into the next chunk.
        V8 carry_e[4], carry_o[4];
        for (int a = 0; a < 4; ++a) carry_e[a] = carry_o[a] = simd::zero();
        int64_t jc = 0;
        for (; jc < d.tw; jc += 8) {
          // Lanes past the row's last tile load as zero and add nothing.
          const simd::Mask mask = simd::firstLanes(d.tw - jc);
          const simd::Mask* partial = d.tw - jc < 8 ? &mask : nullptr;
          V8 r[4][4];  // B dv
          for (int b = 0; b < 4; ++b) {
            const V8 v0 = get(src + (0 + b) * plane + jc, partial);
            const V8 v1 = get(src + (4 + b) * plane + jc, partial);
            const V8 v2 = get(src + (8 + b) * plane + jc, partial);
            const V8 v3 = get(src + (12 + b) * plane + jc, partial);
            r[0][b] = v0;
            r[1][b] = v1 - v2 + v3;
            r[2][b] = v1 + v2 - v0;
            r[3][b] = -v3;
          }
          for (int a = 0; a < 4; ++a) {  // (B dv) B^T, added to padded row 2ti+a
            const int slot = static_cast<int>((2 * ti + a) % 4);
            const V8 h0 = r[a][0], h1 = r[a][1] - r[a][2] + r[a][3];
            const V8 h2 = r[a][1] + r[a][2] - r[a][0], h3 = -r[a][3];
            float* er = e[slot] + jc;
            float* orow = o[slot] + jc;
            simd::store(er, simd::load(er) + h0 + simd::shiftUp(h2, carry_e[a]));
            simd::store(orow, simd::load(orow) + h1 + simd::shiftUp(h3, carry_o[a]));
            carry_e[a] = h2;
            carry_o[a] = h3;
          }
        }
        for (int a = 0; a < 4; ++a) {  // the last tile's carry
          const int slot = static_cast<int>((2 * ti + a) % 4);
          float* er = e[slot] + jc;
          float* orow = o[slot] + jc;
          simd::store(er, simd::load(er) + simd::shiftUp(simd::zero(), carry_e[a]));
          simd::store(orow, simd::load(orow) + simd::shiftUp(simd::zero(), carry_o[a]));
        }
        emit(dxp, 2 * ti);
        emit(dxp, 2 * ti + 1);
      }
      emit(dxp, 2 * d.th);
      emit(dxp, 2 * d.th + 1);
    }
}

}  // namespace dtrain::ops
