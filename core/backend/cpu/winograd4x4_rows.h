// Winograd F(4x4,3x3)'s functions, which callers reach through
// ops::winograd4x4() (ops.h: the same contracts as F(2x2,3x3)'s), and what
// their transform kernels (winograd4x4_forward.cpp, winograd4x4_backward.cpp)
// share: tile geometry, padded rows split into four phases, and the 1-D
// transforms (winograd4x4_algebra.h, written once for these 8-lane kernels and
// the 512-bit ones of winograd4x4_avx512.cpp). Internal to core/backend/cpu.
//
// Vectorisation runs across the tiles of one tile row (8 tiles per vector),
// as in F(2x2,3x3) (winograd_rows.h). A padded row is split into four phases,
// P_k[j] = padded column 4j + k, so tile j's six columns are P0[j], P1[j],
// P2[j], P3[j], P0[j+1], P1[j+1]; the "+1" neighbours come from lane shifts.
// The padding q (0 to 2 columns) is applied by lane shifts when a row is
// split or written back, so the transforms themselves see no padding cases.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/backend/cpu/vec8.h"
#include "core/backend/cpu/winograd4x4_algebra.h"
#include "core/backend/cpu/winograd_dims.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

WinogradTiles winograd4x4Tiles(const Window2d& g);
void winograd4x4FilterTransform(const float* w, int64_t filters, int64_t channels, float* u);
void winograd4x4FilterGradTransform(const float* du, int64_t filters, int64_t channels, float* dw);
void winograd4x4InputTransform(const float* x, int64_t n, const Window2d& g, float* v, int64_t ldv,
                               int64_t plane);
void winograd4x4OutputTransform(const float* m, int64_t ldm, int64_t plane, int64_t n, int64_t filters,
                                const Window2d& g, const float* bias, bool relu, float* y);
void winograd4x4GradOutputTransform(const float* dy, const float* relu_out, int64_t n, int64_t filters,
                                    const Window2d& g, float* z, int64_t ldz, int64_t plane);
void winograd4x4GradInputTransform(const float* dv, int64_t ldv, int64_t plane, int64_t n, const Window2d& g,
                                   float* dx);

}  // namespace dtrain::ops

namespace dtrain::ops::simd {
// The scaling the transforms (winograd4x4_algebra.h) find beside V8.
inline V8 times(float s, V8 a) { return broadcast(s) * a; }
}  // namespace dtrain::ops::simd

namespace dtrain::ops::winograd4 {

using simd::V8;

inline Dims dims(const Window2d& g) {
  const WinogradTiles tiles = winograd4x4Tiles(g);
  const int64_t tw = tiles.cols;
  return {g.height,   g.width, g.outHeight(),     g.outWidth(),    g.pad_h, g.pad_w,
          tiles.rows, tw,      tiles.perSample(), (tw + 8) / 8 * 8};
}

// Splits padded row `row` (w input floats, or null for a padding row) into
// the phases of `split`. The row is read in place and the padding q applied
// by lane shifts: copying it into a padded line first made every aligned
// load straddle the copy's unaligned stores, which cannot be forwarded.
inline void splitRow(const float* row, const Dims& d, float* split) {
  if (!row) {
    for (int k = 0; k < 4; ++k) std::memset(split + k * kPhaseFloats, 0, sizeof(float) * (d.used + 8));
    return;
  }
  V8 prev[4] = {simd::zero(), simd::zero(), simd::zero(), simd::zero()};
  for (int64_t j = 0; j < d.used; j += 8) {
    const int64_t at = 4 * j, left = d.w - at;  // input column of lane 0, phase 0
    V8 in[4], p[4];                             // in[k] lane l: input column 4(j + l) + k
    if (left > 0) {
      splitPhases(simd::loadN(row + at, left), simd::loadN(row + at + 8, left - 8),
                  simd::loadN(row + at + 16, left - 16), simd::loadN(row + at + 24, left - 24), in);
    } else {  // past the row (the last tiles' right neighbours): only the padding shifts left to do
      for (V8& e : in) e = simd::zero();
    }
    if (d.q == 0) {
      for (int k = 0; k < 4; ++k) p[k] = in[k];
    } else if (d.q == 1) {  // padded column 4j is input 4j - 1
      p[0] = simd::shiftUp(in[3], prev[3]);
      p[1] = in[0];
      p[2] = in[1];
      p[3] = in[2];
    } else {  // q == 2: padded column 4j is input 4j - 2
      p[0] = simd::shiftUp(in[2], prev[2]);
      p[1] = simd::shiftUp(in[3], prev[3]);
      p[2] = in[0];
      p[3] = in[1];
    }
    for (int k = 0; k < 4; ++k) {
      simd::store(split + k * kPhaseFloats + j, p[k]);
      prev[k] = in[k];
    }
  }
}

// The six padded columns of tiles jc..jc+7 from a split row.
inline void tileColumns(const float* split, int64_t jc, V8* col) {
  for (int k = 0; k < 4; ++k) col[k] = simd::load(split + k * kPhaseFloats + jc);
  col[4] = simd::shiftDown(col[0], simd::load(split + jc + 8));
  col[5] = simd::shiftDown(col[1], simd::load(split + kPhaseFloats + jc + 8));
}

// Writes input row dx (w floats) from split accumulators: dx[ix] = padded[ix + q].
inline void emitRow(const float* split, const Dims& d, float* dx) {
  const float* p0 = split;
  const float* p1 = split + kPhaseFloats;
  const float* p2 = split + 2 * kPhaseFloats;
  const float* p3 = split + 3 * kPhaseFloats;
  for (int64_t j = 0; 4 * j < d.w; j += 8) {
    V8 in[4], out[4];  // in[k] lane l: input column 4(j + l) + k
    if (d.q == 0) {
      in[0] = simd::load(p0 + j), in[1] = simd::load(p1 + j), in[2] = simd::load(p2 + j),
      in[3] = simd::load(p3 + j);
    } else if (d.q == 1) {  // input 4j is padded 4j + 1
      in[0] = simd::load(p1 + j), in[1] = simd::load(p2 + j), in[2] = simd::load(p3 + j);
      in[3] = simd::shiftDown(simd::load(p0 + j), simd::load(p0 + j + 8));
    } else {  // q == 2: input 4j is padded 4j + 2
      in[0] = simd::load(p2 + j), in[1] = simd::load(p3 + j);
      in[2] = simd::shiftDown(simd::load(p0 + j), simd::load(p0 + j + 8));
      in[3] = simd::shiftDown(simd::load(p1 + j), simd::load(p1 + j + 8));
    }
    mergePhases(in, out);
    for (int k = 0; k < 4; ++k) simd::storeN(dx + 4 * j + 8 * k, out[k], d.w - 4 * j - 8 * k);
  }
}

}  // namespace dtrain::ops::winograd4
