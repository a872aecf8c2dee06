// Winograd F(4x4,3x3)'s activation transforms at 512 bits. The 8-lane
// kernels (winograd4x4_forward.cpp, winograd4x4_backward.cpp) vectorise
// across the tiles of one tile row; at ResNet's and the cnn's small planes a
// row has only 2 to 8 tiles, so wider vectors across the same tiles would sit
// mostly idle. Here each vector carries two planes instead (lanes 0-7 one
// (sample, channel) plane, lanes 8-15 the next, at the same tile positions),
// so every step of the 8-lane plan does twice the work and nothing about the
// geometry changes. Split rows hold both planes' phases side by side (16
// floats per 8 tiles), so the transforms load them as single vectors.
#include "core/backend/cpu/avx512_intrinsics.h"
#include "core/backend/cpu/cpu_kernels_avx512.h"
#include "core/backend/cpu/plane_pairs_avx512.h"
#include "core/backend/cpu/winograd4x4_algebra.h"
#include "core/backend/cpu/winograd_dims.h"

namespace dtrain::ops::avx512 {

namespace {

using namespace pairs;
using winograd4::Dims;
using winograd4::kPhaseFloats;

// A split row of a plane pair: four phases of kPair floats, entry j of both
// planes in the 16-float block j / 8.
constexpr int64_t kPair = 2 * kPhaseFloats;
constexpr int64_t kPairSplit = 4 * kPair;
// Rings of eight split rows (padded row y in slot y % 8).
constexpr int64_t kRing = 8 * kPairSplit;

// Splits padded row y of both planes (ra, rb: their input rows, null for a
// padding row) into phases, the padding q applied by lane shifts as in
// winograd4x4_rows.h's splitRow.
void splitRows(const float* ra, const float* rb, const Dims& d, float* split) {
  if (!ra) {
    zeroParts(split, 4, kPair, 2 * d.used + 16);
    return;
  }
  V16 prev[4] = {zero(), zero(), zero(), zero()};
  for (int64_t j = 0; j < d.used; j += 8) {
    const int64_t at = 4 * j, left = d.w - at;
    V16 in[4], p[4];
    if (left > 0) {
      winograd4::splitPhases(loadHalves(ra + at, rb + at, lanes(left)),
                             loadHalves(ra + at + 8, rb + at + 8, lanes(left - 8)),
                             loadHalves(ra + at + 16, rb + at + 16, lanes(left - 16)),
                             loadHalves(ra + at + 24, rb + at + 24, lanes(left - 24)), in);
    } else {  // past the row (the last tiles' right neighbours): only the padding shifts left to do
      for (V16& e : in) e = zero();
    }
    if (d.q == 0) {
      for (int k = 0; k < 4; ++k) p[k] = in[k];
    } else if (d.q == 1) {
      p[0] = shiftUp(in[3], prev[3]);
      p[1] = in[0];
      p[2] = in[1];
      p[3] = in[2];
    } else {
      p[0] = shiftUp(in[2], prev[2]);
      p[1] = shiftUp(in[3], prev[3]);
      p[2] = in[0];
      p[3] = in[1];
    }
    for (int k = 0; k < 4; ++k) {
      store(split + k * kPair + 2 * j, p[k]);
      prev[k] = in[k];
    }
  }
}

// The six padded columns of tiles jc..jc+7 of both planes.
inline void tileColumns(const float* split, int64_t jc, V16* col) {
  for (int k = 0; k < 4; ++k) col[k] = load(split + k * kPair + 2 * jc);
  col[4] = shiftDown(col[0], load(split + 2 * jc + 16));
  col[5] = shiftDown(col[1], load(split + kPair + 2 * jc + 16));
}

// Writes both planes' input row (w floats) from split accumulators.
void emitRows(const float* split, const Dims& d, float* dxa, float* dxb) {
  const float* p0 = split;
  const float* p1 = split + kPair;
  const float* p2 = split + 2 * kPair;
  const float* p3 = split + 3 * kPair;
  for (int64_t j = 0; 4 * j < d.w; j += 8) {
    const int64_t e = 2 * j;
    V16 in[4], out[4];
    if (d.q == 0) {
      in[0] = load(p0 + e), in[1] = load(p1 + e), in[2] = load(p2 + e), in[3] = load(p3 + e);
    } else if (d.q == 1) {
      in[0] = load(p1 + e), in[1] = load(p2 + e), in[2] = load(p3 + e);
      in[3] = shiftDown(load(p0 + e), load(p0 + e + 16));
    } else {
      in[0] = load(p2 + e), in[1] = load(p3 + e);
      in[2] = shiftDown(load(p0 + e), load(p0 + e + 16));
      in[3] = shiftDown(load(p1 + e), load(p1 + e + 16));
    }
    winograd4::mergePhases(in, out);
    for (int k = 0; k < 4; ++k) {
      const int64_t at = 4 * j + 8 * k;
      if (at < d.w) storeHalves(dxa + at, dxb ? dxb + at : nullptr, out[k], lanes(d.w - at));
    }
  }
}

}  // namespace

void winograd4x4InputTransform(const float* x, int64_t n, int64_t channels, const Dims& d, float* v,
                               int64_t ldv, int64_t plane) {
  alignas(64) float split[kRing];
  zeroParts(split, 8 * 4, kPair, 2 * d.used + 16);  // 8 rows of 4 phases
  const int64_t planes = n * channels, area = d.h * d.w;
  for (int64_t pa = 0; pa < planes; pa += 2) {
    const bool two = pa + 1 < planes;
    const float* src_a = x + pa * area;
    const float* src_b = two ? src_a + area : src_a;
    float* row_a = rowOf(v, pa, channels, ldv, d.t);
    float* row_b = two ? rowOf(v, pa + 1, channels, ldv, d.t) : nullptr;
    auto load_row = [&](int64_t y) {
      const int64_t iy = y - d.p;
      const bool inside = iy >= 0 && iy < d.h;
      splitRows(inside ? src_a + iy * d.w : nullptr, src_b + iy * d.w, d, split + (y % 8) * kPairSplit);
    };
    load_row(0);
    load_row(1);
    for (int64_t ti = 0; ti < d.th; ++ti) {
      for (int64_t y = 4 * ti + 2; y < 4 * ti + 6; ++y) load_row(y);
      float* dst_a = row_a + ti * d.tw;
      float* dst_b = row_b ? row_b + ti * d.tw : nullptr;
      for (int64_t jc = 0; jc < d.tw; jc += 8) {
        V16 h[6][6];  // d B, row by row
        for (int a = 0; a < 6; ++a) {
          V16 col[6];
          tileColumns(split + ((4 * ti + a) % 8) * kPairSplit, jc, col);
          winograd4::inputRows(col, h[a]);
        }
        const __mmask8 m = lanes(d.tw - jc);
        for (int b = 0; b < 6; ++b) {  // B^T (d B)
          const V16 column[6] = {h[0][b], h[1][b], h[2][b], h[3][b], h[4][b], h[5][b]};
          V16 out[6];
          winograd4::inputRows(column, out);
          for (int a = 0; a < 6; ++a) {
            const int64_t at = jc + (6 * a + b) * plane;
            storeHalves(dst_a + at, dst_b ? dst_b + at : nullptr, out[a], m);
          }
        }
      }
    }
  }
}

void winograd4x4OutputTransform(const float* m, int64_t ldm, int64_t plane, int64_t n, int64_t filters,
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
      const int64_t rows = d.ho - 4 * ti < 4 ? d.ho - 4 * ti : 4;
      for (int64_t jc = 0; jc < d.tw; jc += 8) {
        const __mmask8 mt = lanes(d.tw - jc);  // lanes past the row's last tile are not read
        const int64_t tile = ti * d.tw + jc;
        V16 t[4][6];  // A^T M
        for (int col = 0; col < 6; ++col) {
          V16 mv[6], out[4];
          for (int a = 0; a < 6; ++a) {
            const int64_t at = tile + (6 * a + col) * plane;
            mv[a] = loadHalves(src_a + at, src_b + at, mt);
          }
          winograd4::outputRows(mv, out);
          for (int r = 0; r < 4; ++r) t[r][col] = out[r];
        }
        const int64_t left = d.wo - 4 * jc;
        for (int r = 0; r < rows; ++r) {  // (A^T M) A
          V16 yv[4], out[4];
          winograd4::outputRows(t[r], yv);
          for (int k = 0; k < 4; ++k) {
            yv[k] = yv[k] + bv;
            if (relu) yv[k] = max0(yv[k]);
          }
          winograd4::mergePhases(yv, out);
          const int64_t row = (4 * ti + r) * d.wo + 4 * jc;
          for (int k = 0; k < 4; ++k)
            if (left > 8 * k)
              storeHalves(y_a + row + 8 * k, y_b ? y_b + row + 8 * k : nullptr, out[k], lanes(left - 8 * k));
        }
      }
    }
  }
}

void winograd4x4GradOutputTransform(const float* dy, const float* relu_out, int64_t n, int64_t filters,
                                    const Dims& d, float* z, int64_t ldz, int64_t plane) {
  const int64_t planes = n * filters, area = d.ho * d.wo;
  for (int64_t pa = 0; pa < planes; pa += 2) {
    const bool two = pa + 1 < planes;
    const int64_t off_a = pa * area, off_b = two ? off_a + area : off_a;
    float* z_a = rowOf(z, pa, filters, ldz, d.t);
    float* z_b = two ? rowOf(z, pa + 1, filters, ldz, d.t) : nullptr;
    for (int64_t ti = 0; ti < d.th; ++ti)
      for (int64_t jc = 0; jc < d.tw; jc += 8) {
        const int64_t left = d.wo - 4 * jc;  // the row's columns [4jc, wo), masked past wo
        V16 t[4][6];                         // dY A^T, row by row
        for (int r = 0; r < 4; ++r) {
          const int64_t oy = 4 * ti + r;
          V16 gv[4];  // dy at output row oy, column 4(jc + lane) + k
          if (oy >= d.ho) {
            for (V16& e : gv) e = zero();
          } else {
            const int64_t at = oy * d.wo + 4 * jc;
            V16 raw[4];
            for (int k = 0; k < 4; ++k) {
              const int64_t ak = at + 8 * k;
              const __mmask8 mk = lanes(left - 8 * k);
              raw[k] = loadHalves(dy + off_a + ak, dy + off_b + ak, mk);
              if (relu_out)
                raw[k] = wherePositive(loadHalves(relu_out + off_a + ak, relu_out + off_b + ak, mk), raw[k]);
            }
            winograd4::splitPhases(raw[0], raw[1], raw[2], raw[3], gv);
          }
          winograd4::gradOutputRows(gv, t[r]);
        }
        const __mmask8 mt = lanes(d.tw - jc);
        const int64_t tile = ti * d.tw + jc;
        for (int b = 0; b < 6; ++b) {  // A (dY A^T)
          const V16 column[4] = {t[0][b], t[1][b], t[2][b], t[3][b]};
          V16 out[6];
          winograd4::gradOutputRows(column, out);
          for (int a = 0; a < 6; ++a) {
            const int64_t at = tile + (6 * a + b) * plane;
            storeHalves(z_a + at, z_b ? z_b + at : nullptr, out[a], mt);
          }
        }
      }
  }
}

void winograd4x4GradInputTransform(const float* dv, int64_t ldv, int64_t plane, int64_t n, int64_t channels,
                                   const Dims& d, float* dx) {
  // Split padded-row accumulators: tile row ti adds to rows 4ti..4ti+5;
  // after it, rows 4ti..4ti+3 are complete and are written out.
  alignas(64) float acc[kRing];
  zeroParts(acc, 8 * 4, kPair, 2 * d.used + 16);
  const int64_t planes = n * channels, area = d.h * d.w;
  for (int64_t pa = 0; pa < planes; pa += 2) {
    const bool two = pa + 1 < planes;
    const float* src_a = rowOf(dv, pa, channels, ldv, d.t);
    const float* src_b = two ? rowOf(dv, pa + 1, channels, ldv, d.t) : src_a;
    float* dx_a = dx + pa * area;
    float* dx_b = two ? dx_a + area : nullptr;
    auto emit = [&](int64_t y) {
      const int64_t iy = y - d.p;
      float* split = acc + (y % 8) * kPairSplit;
      if (iy >= 0 && iy < d.h) emitRows(split, d, dx_a + iy * d.w, dx_b ? dx_b + iy * d.w : nullptr);
      zeroParts(split, 4, kPair, 2 * d.used);
    };
    for (int64_t ti = 0; ti < d.th; ++ti) {
      // Tile j adds its columns 4 and 5 to P0[j+1] and P1[j+1]: those vectors
      // are shifted up one lane, the top lane carried into the next chunk.
      V16 carry0[6], carry1[6];
      for (int a = 0; a < 6; ++a) carry0[a] = carry1[a] = zero();
      int64_t jc = 0;
      for (; jc < d.tw; jc += 8) {
        const __mmask8 mt = lanes(d.tw - jc);  // lanes past the last tile load as zero and add nothing
        const int64_t tile = ti * d.tw + jc;
        V16 r[6][6];  // B dv
        for (int b = 0; b < 6; ++b) {
          V16 column[6], out[6];
          for (int a = 0; a < 6; ++a) {
            const int64_t at = tile + (6 * a + b) * plane;
            column[a] = loadHalves(src_a + at, src_b + at, mt);
          }
          winograd4::gradInputRows(column, out);
          for (int a = 0; a < 6; ++a) r[a][b] = out[a];
        }
        for (int a = 0; a < 6; ++a) {  // (B dv) B^T, added to padded row 4ti+a
          V16 h[6];
          winograd4::gradInputRows(r[a], h);
          float* split = acc + ((4 * ti + a) % 8) * kPairSplit + 2 * jc;
          float* p0 = split;
          float* p1 = split + kPair;
          float* p2 = split + 2 * kPair;
          float* p3 = split + 3 * kPair;
          store(p0, load(p0) + h[0] + shiftUp(h[4], carry0[a]));
          store(p1, load(p1) + h[1] + shiftUp(h[5], carry1[a]));
          store(p2, load(p2) + h[2]);
          store(p3, load(p3) + h[3]);
          carry0[a] = h[4];
          carry1[a] = h[5];
        }
      }
      for (int a = 0; a < 6; ++a) {  // the last tile's carry
        float* split = acc + ((4 * ti + a) % 8) * kPairSplit + 2 * jc;
        store(split, load(split) + shiftUp(zero(), carry0[a]));
        float* p1 = split + kPair;
        store(p1, load(p1) + shiftUp(zero(), carry1[a]));
      }
      for (int64_t y = 4 * ti; y < 4 * ti + 4; ++y) emit(y);
    }
    emit(4 * d.th);
    emit(4 * d.th + 1);
  }
}

}  // namespace dtrain::ops::avx512
