// Winograd F(2x2,3x3)'s activation transforms at 512 bits: the 8-lane plan
// of winograd_forward.cpp and winograd_backward.cpp (vectors across the
// tiles of one tile row, padded rows split into even and odd columns) with
// two planes a vector (plane_pairs_avx512.h), as winograd4x4_avx512.cpp does
// for F(4x4,3x3). Split rows hold both planes' entries side by side (16
// floats per 8 tiles).
#include "core/backend/cpu/cpu_kernels_avx512.h"
#include "core/backend/cpu/plane_pairs_avx512.h"
#include "core/backend/cpu/winograd_dims.h"

namespace dtrain::ops::avx512 {

namespace {

using namespace pairs;
using winograd::Dims;

// A split row of a plane pair: even or odd columns, entry j of both planes in
// the 16-float block j / 8.
constexpr int64_t kPairRow = 2 * winograd::kRowFloats;
// Rings of four split rows (padded row y in slot y % 4), even and odd.
constexpr int64_t kRing = 4 * kPairRow;

// ev[k] = row[2k], od[k] = row[2k+1] for both planes, zero past w.
void splitRows(const float* ra, const float* rb, int64_t w, float* ev, float* od) {
  for (int64_t k = 0; 2 * k < w; k += 8) {
    V16 a, b;
    deinterleave(loadHalves(ra + 2 * k, rb + 2 * k, lanes(w - 2 * k)),
                 loadHalves(ra + 2 * k + 8, rb + 2 * k + 8, lanes(w - 2 * k - 8)), a, b);
    store(ev + 2 * k, a);
    store(od + 2 * k, b);
  }
}

// The padded columns 2j .. 2j+3 of tiles j = jc..jc+7 of both planes, from a
// split row and the left padding q (winograd_rows.h's tileColumns).
struct TileColumns {
  V16 d0, d1, d2, d3;
};
inline TileColumns tileColumns(const float* ev, const float* od, int64_t jc, int64_t q) {
  const int64_t e = 2 * jc;
  const V16 ev0 = load(ev + e), od0 = load(od + e);
  if (q == 0) return {ev0, od0, shiftDown(ev0, load(ev + e + 16)), shiftDown(od0, load(od + e + 16))};
  if (q == 1) {
    const V16 odm = jc ? load(od + e - 16) : zero();
    return {shiftUp(od0, odm), ev0, od0, shiftDown(ev0, load(ev + e + 16))};
  }
  const V16 evm = jc ? load(ev + e - 16) : zero(), odm = jc ? load(od + e - 16) : zero();
  return {shiftUp(ev0, evm), shiftUp(od0, odm), ev0, od0};
}

// Both planes' input row (w floats) from padded-row accumulators: dx[ix] = padded[ix + q].
void emitRows(const float* ev, const float* od, int64_t w, int64_t q, float* dxa, float* dxb) {
  for (int64_t j = 0; 2 * j < w; j += 8) {
    const int64_t e = 2 * j;
    const V16 e0 = load(ev + e), o0 = load(od + e);
    V16 first = e0, second = o0;
    if (q == 1) {
      first = o0;
      second = shiftDown(e0, load(ev + e + 16));
    } else if (q == 2) {
      first = shiftDown(e0, load(ev + e + 16));
      second = shiftDown(o0, load(od + e + 16));
    }
    V16 lo, hi;
    interleave(first, second, lo, hi);
    storeHalves(dxa + 2 * j, dxb ? dxb + 2 * j : nullptr, lo, lanes(w - 2 * j));
    if (2 * j + 8 < w)
      storeHalves(dxa + 2 * j + 8, dxb ? dxb + 2 * j + 8 : nullptr, hi, lanes(w - 2 * j - 8));
  }
}

}  // namespace

void winograd2x2InputTransform(const float* x, int64_t n, int64_t channels, const Dims& d, float* v,
                               int64_t ldv, int64_t plane) {
  alignas(64) float ev[kRing], od[kRing];
  zeroParts(ev, 4, kPairRow, 2 * d.used);
  zeroParts(od, 4, kPairRow, 2 * d.used);
  const int64_t planes = n * channels, area = d.h * d.w;
  for (int64_t pa = 0; pa < planes; pa += 2) {
    const bool two = pa + 1 < planes;
    const float* src_a = x + pa * area;
    const float* src_b = two ? src_a + area : src_a;
    float* row_a = rowOf(v, pa, channels, ldv, d.t);
    float* row_b = two ? rowOf(v, pa + 1, channels, ldv, d.t) : nullptr;
    auto load_row = [&](int64_t y) {
      const int64_t iy = y - d.p;
      float* e = ev + (y % 4) * kPairRow;
      float* o = od + (y % 4) * kPairRow;
      if (iy >= 0 && iy < d.h) {
        splitRows(src_a + iy * d.w, src_b + iy * d.w, d.w, e, o);
      } else {
        zeroFloats(e, 2 * d.used);
        zeroFloats(o, 2 * d.used);
      }
    };
    load_row(0);
    load_row(1);
    for (int64_t ti = 0; ti < d.th; ++ti) {
      load_row(2 * ti + 2);
      load_row(2 * ti + 3);
      float* dst_a = row_a + ti * d.tw;
      float* dst_b = row_b ? row_b + ti * d.tw : nullptr;
      for (int64_t jc = 0; jc < d.tw; jc += 8) {
        V16 h[4][4];  // d B, row by row
        for (int a = 0; a < 4; ++a) {
          const int64_t slot = (2 * ti + a) % 4;
          const TileColumns t = tileColumns(ev + slot * kPairRow, od + slot * kPairRow, jc, d.q);
          h[a][0] = t.d0 - t.d2;
          h[a][1] = t.d1 + t.d2;
          h[a][2] = t.d2 - t.d1;
          h[a][3] = t.d1 - t.d3;
        }
        const __mmask8 m = lanes(d.tw - jc);
        for (int b = 0; b < 4; ++b) {  // B^T (d B)
          const V16 out[4] = {h[0][b] - h[2][b], h[1][b] + h[2][b], h[2][b] - h[1][b], h[1][b] - h[3][b]};
          for (int a = 0; a < 4; ++a) {
            const int64_t at = jc + (4 * a + b) * plane;
            storeHalves(dst_a + at, dst_b ? dst_b + at : nullptr, out[a], m);
          }
        }
      }
    }
  }
}

void winograd2x2OutputTransform(const float* m, int64_t ldm, int64_t plane, int64_t n, int64_t filters,
                                const Dims& d, const float* bias, bool relu, float* y) {
  const int64_t planes = n * filters, area = d.ho * d.wo;
  for (int64_t pa = 0; pa < planes; pa += 2) {
    const bool two = pa + 1 < planes;
    const int64_t pb = two ? pa + 1 : pa;
    const float* src_a = rowOf(m, pa, filters, ldm, d.t);
    const float* src_b = rowOf(m, pb, filters, ldm, d.t);
    float* y_a = y + pa * area;
    float* y_b = two ? y_a + area : nullptr;
    const V16 bv = bias ? halves(bias[pa % filters], bias[pb % filters]) : zero();
    for (int64_t ti = 0; ti < d.th; ++ti) {
      const bool has_row1 = 2 * ti + 1 < d.ho;
      for (int64_t jc = 0; jc < d.tw; jc += 8) {
        const __mmask8 mt = lanes(d.tw - jc);  // lanes past the row's last tile are not read
        const int64_t tile = ti * d.tw + jc;
        V16 t[2][4];  // A^T M
        for (int col = 0; col < 4; ++col) {
          V16 mv[4];
          for (int a = 0; a < 4; ++a)
            mv[a] =
                loadHalves(src_a + tile + (4 * a + col) * plane, src_b + tile + (4 * a + col) * plane, mt);
          t[0][col] = mv[0] + mv[1] + mv[2];
          t[1][col] = mv[1] - mv[2] - mv[3];
        }
        const int64_t left = d.wo - 2 * jc;
        for (int r = 0; r < 2; ++r) {  // (A^T M) A
          if (r == 1 && !has_row1) break;
          V16 y0 = t[r][0] + t[r][1] + t[r][2] + bv;
          V16 y1 = t[r][1] - t[r][2] - t[r][3] + bv;
          if (relu) {
            y0 = max0(y0);
            y1 = max0(y1);
          }
          V16 lo, hi;
          interleave(y0, y1, lo, hi);
          const int64_t row = (2 * ti + r) * d.wo + 2 * jc;
          storeHalves(y_a + row, y_b ? y_b + row : nullptr, lo, lanes(left));
          if (left > 8) storeHalves(y_a + row + 8, y_b ? y_b + row + 8 : nullptr, hi, lanes(left - 8));
        }
      }
    }
  }
}

void winograd2x2GradOutputTransform(const float* dy, const float* relu_out, int64_t n, int64_t filters,
                                    const Dims& d, float* z, int64_t ldz, int64_t plane) {
  const int64_t planes = n * filters, area = d.ho * d.wo;
  for (int64_t pa = 0; pa < planes; pa += 2) {
    const bool two = pa + 1 < planes;
    const int64_t off_a = pa * area, off_b = two ? off_a + area : off_a;
    float* z_a = rowOf(z, pa, filters, ldz, d.t);
    float* z_b = two ? rowOf(z, pa + 1, filters, ldz, d.t) : nullptr;
    for (int64_t ti = 0; ti < d.th; ++ti)
      for (int64_t jc = 0; jc < d.tw; jc += 8) {
        const int64_t left = d.wo - 2 * jc;  // the row's columns [2jc, wo), masked past wo
        const __mmask8 m_lo = lanes(left), m_hi = lanes(left - 8);
        V16 gv[2][2];  // dy at output row 2ti+r, column 2(jc+lane)+c
        for (int r = 0; r < 2; ++r) {
          const int64_t oy = 2 * ti + r;
          if (oy >= d.ho) {
            gv[r][0] = gv[r][1] = zero();
            continue;
          }
          const int64_t at = oy * d.wo + 2 * jc;
          V16 lo = loadHalves(dy + off_a + at, dy + off_b + at, m_lo);
          V16 hi = loadHalves(dy + off_a + at + 8, dy + off_b + at + 8, m_hi);
          if (relu_out) {
            lo = wherePositive(loadHalves(relu_out + off_a + at, relu_out + off_b + at, m_lo), lo);
            hi = wherePositive(loadHalves(relu_out + off_a + at + 8, relu_out + off_b + at + 8, m_hi), hi);
          }
          deinterleave(lo, hi, gv[r][0], gv[r][1]);
        }
        V16 t[4][2];  // A g
        for (int c = 0; c < 2; ++c) {
          t[0][c] = gv[0][c];
          t[1][c] = gv[0][c] + gv[1][c];
          t[2][c] = gv[0][c] - gv[1][c];
          t[3][c] = -gv[1][c];
        }
        const __mmask8 mt = lanes(d.tw - jc);
        const int64_t tile = ti * d.tw + jc;
        for (int a = 0; a < 4; ++a) {  // (A g) A^T
          const V16 out[4] = {t[a][0], t[a][0] + t[a][1], t[a][0] - t[a][1], -t[a][1]};
          for (int b = 0; b < 4; ++b) {
            const int64_t at = tile + (4 * a + b) * plane;
            storeHalves(z_a + at, z_b ? z_b + at : nullptr, out[b], mt);
          }
        }
      }
  }
}

void winograd2x2GradInputTransform(const float* dv, int64_t ldv, int64_t plane, int64_t n, int64_t channels,
                                   const Dims& d, float* dx) {
  // Padded-row accumulators (even and odd columns): tile row ti adds to rows
  // 2ti..2ti+3; after it, rows 2ti and 2ti+1 are complete and are written out.
  alignas(64) float e[kRing], o[kRing];
  zeroParts(e, 4, kPairRow, 2 * d.used);
  zeroParts(o, 4, kPairRow, 2 * d.used);
  const int64_t planes = n * channels, area = d.h * d.w;
  for (int64_t pa = 0; pa < planes; pa += 2) {
    const bool two = pa + 1 < planes;
    const float* src_a = rowOf(dv, pa, channels, ldv, d.t);
    const float* src_b = two ? rowOf(dv, pa + 1, channels, ldv, d.t) : src_a;
    float* dx_a = dx + pa * area;
    float* dx_b = two ? dx_a + area : nullptr;
    auto emit = [&](int64_t y) {
      const int64_t iy = y - d.p;
      float* er = e + (y % 4) * kPairRow;
      float* orow = o + (y % 4) * kPairRow;
      if (iy >= 0 && iy < d.h)
        emitRows(er, orow, d.w, d.q, dx_a + iy * d.w, dx_b ? dx_b + iy * d.w : nullptr);
      zeroFloats(er, 2 * d.used);
      zeroFloats(orow, 2 * d.used);
    };
    for (int64_t ti = 0; ti < d.th; ++ti) {
      // Tile j adds its columns 2 and 3 to E[j+1] and O[j+1]: those vectors
      // are shifted up one lane, the top lane carried into the next chunk.
      V16 carry_e[4], carry_o[4];
      for (int a = 0; a < 4; ++a) carry_e[a] = carry_o[a] = zero();
      int64_t jc = 0;
      for (; jc < d.tw; jc += 8) {
        const __mmask8 mt = lanes(d.tw - jc);  // lanes past the last tile load as zero and add nothing
        const int64_t tile = ti * d.tw + jc;
        V16 r[4][4];  // B dv
        for (int b = 0; b < 4; ++b) {
          V16 v[4];
          for (int a = 0; a < 4; ++a)
            v[a] = loadHalves(src_a + tile + (4 * a + b) * plane, src_b + tile + (4 * a + b) * plane, mt);
          r[0][b] = v[0];
          r[1][b] = v[1] - v[2] + v[3];
          r[2][b] = v[1] + v[2] - v[0];
          r[3][b] = -v[3];
        }
        for (int a = 0; a < 4; ++a) {  // (B dv) B^T, added to padded row 2ti+a
          const int64_t slot = (2 * ti + a) % 4;
          const V16 h0 = r[a][0], h1 = r[a][1] - r[a][2] + r[a][3];
          const V16 h2 = r[a][1] + r[a][2] - r[a][0], h3 = -r[a][3];
          float* er = e + slot * kPairRow + 2 * jc;
          float* orow = o + slot * kPairRow + 2 * jc;
          store(er, load(er) + h0 + shiftUp(h2, carry_e[a]));
          store(orow, load(orow) + h1 + shiftUp(h3, carry_o[a]));
          carry_e[a] = h2;
          carry_o[a] = h3;
        }
      }
      for (int a = 0; a < 4; ++a) {  // the last tile's carry
        const int64_t slot = (2 * ti + a) % 4;
        float* er = e + slot * kPairRow + 2 * jc;
        float* orow = o + slot * kPairRow + 2 * jc;
        store(er, load(er) + shiftUp(zero(), carry_e[a]));
        store(orow, load(orow) + shiftUp(zero(), carry_o[a]));
      }
      emit(2 * ti);
      emit(2 * ti + 1);
    }
    emit(2 * d.th);
    emit(2 * d.th + 1);
  }
}

}  // namespace dtrain::ops::avx512
