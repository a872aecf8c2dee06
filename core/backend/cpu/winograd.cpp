// Winograd F(2x2,3x3) transforms for 3x3 stride-1 convolution (Lavin & Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2015):
//   forward        Y  = A^T [ (G g G^T) (.) (B^T d B) ] A
//   weight grad    dg = G^T [ (A dY A^T) (.) (B^T d B) ] G
//   input grad     dd = B   [ (A dY A^T) (.) (G g G^T) ] B^T
// The two gradient forms follow from the forward bilinear identity, so one
// transformed input serves forward and weight gradient, and one transformed
// output gradient serves both gradients. Transformed index xi = 4a + b, where
// a runs along H and b along W.
//
// Vectorisation runs across the tiles of one tile row (8 tiles per vector).
// Input columns are split into even and odd ones ("deinterleaved") so that
// tile j's four columns 2j..2j+3 are E[j], O[j], E[j+1], O[j+1]: plain
// contiguous loads. Row buffers live on the stack, which bounds the padded
// width (kMaxPaddedWidth); wider inputs use im2col.
#include <cstring>

#include "core/backend/cpu/vec8.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

using simd::V8;

namespace {

// One deinterleaved padded row holds tilesW + 1 entries plus slack for the
// j+1 loads of the last vector.
constexpr int64_t kRowFloats = kWinogradMaxPaddedWidth / 2 + 16;

struct Dims {
  int64_t h, w, ho, wo, p, q, th, tw, t;
};

Dims dims(const Window2d& g) {
  WinogradTiles tiles = winogradTiles(g);
  return {g.height, g.width, g.outHeight(), g.outWidth(), g.pad_h, g.pad_w,
          tiles.rows, tiles.cols, tiles.perSample()};
}

// Stores: masked stores are slow on some CPUs (microcoded on AMD Zen), so the
// kernels store whole vectors and let the surplus lanes spill forward into
// memory that the same call overwrites later (the rest of the row, the next
// row or plane). Every kernel writes each destination region in increasing
// address order; `end` bounds the region, and only a store that would cross
// it is masked.
inline void storeSpill(float* p, V8 v, int64_t valid, const float* end) {
  if (end - p < 8)
    simd::storeN(p, v, valid);
  else
    simd::store(p, v);
}

// Fills a deinterleaved padded row: e[j] = row[2j - q], o[j] = row[2j + 1 - q],
// zero outside [0, w). Entries the stores below never reach must already be
// zero (they are: buffers start zeroed and every fill writes the same entries).
void fillRow(const float* row, int64_t w, int64_t q, float* e, float* o) {
  // Input column 2k lands at padded column 2k + q, column 2k + 1 at 2k + 1 + q.
  float* even_dst = (q % 2 == 0) ? e + q / 2 : o + q / 2;
  float* odd_dst = (q % 2 == 0) ? o + q / 2 : e + q / 2 + 1;
  for (int64_t k = 0; 2 * k < w; k += 8) {
    V8 ev, od;
    simd::deinterleave(simd::loadN(row + 2 * k, w - 2 * k), simd::loadN(row + 2 * k + 8, w - 2 * k - 8), ev, od);
    simd::store(even_dst + k, ev);
    simd::store(odd_dst + k, od);
  }
}

// dx row (w floats) from a deinterleaved padded row: dx[ix] = padded[ix + q].
void emitRow(const float* e, const float* o, int64_t w, int64_t q, float* dx, const float* end) {
  // Pairs (first[j], second[j]) are padded columns (q + 2j, q + 2j + 1).
  const float* first = (q % 2 == 0) ? e + q / 2 : o + q / 2;
  const float* second = (q % 2 == 0) ? o + q / 2 : e + q / 2 + 1;
  for (int64_t j = 0; 2 * j < w; j += 8) {
    V8 lo, hi;
    simd::interleave(simd::load(first + j), simd::load(second + j), lo, hi);
    storeSpill(dx + 2 * j, lo, w - 2 * j, end);
    if (2 * j + 8 < w) storeSpill(dx + 2 * j + 8, hi, w - 2 * j - 8, end);
  }
}

}  // namespace

bool winogradSupported(const Window2d& g) {
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h >= 0 &&
         g.pad_h <= 2 && g.pad_w >= 0 && g.pad_w <= 2 && g.height + 2 * g.pad_h >= 3 &&
         g.width + 2 * g.pad_w >= 3 && g.width + 2 * g.pad_w <= kWinogradMaxPaddedWidth;
}

WinogradTiles winogradTiles(const Window2d& g) { return {(g.outHeight() + 1) / 2, (g.outWidth() + 1) / 2}; }

void winogradFilterTransform(const float* w, int64_t filters, int64_t channels, float* u) {
  const int64_t stride = filters * channels;
  for (int64_t f = 0; f < filters; ++f)
    for (int64_t c = 0; c < channels; ++c) {
      const float* k = w + (f * channels + c) * 9;
      float t[4][3];  // G g
      for (int col = 0; col < 3; ++col) {
        const float g0 = k[col], g1 = k[3 + col], g2 = k[6 + col];
        t[0][col] = g0;
        t[1][col] = 0.5f * (g0 + g1 + g2);
        t[2][col] = 0.5f * (g0 - g1 + g2);
        t[3][col] = g2;
      }
      float* dst = u + f * channels + c;
      for (int a = 0; a < 4; ++a) {  // (G g) G^T
        dst[(4 * a + 0) * stride] = t[a][0];
        dst[(4 * a + 1) * stride] = 0.5f * (t[a][0] + t[a][1] + t[a][2]);
        dst[(4 * a + 2) * stride] = 0.5f * (t[a][0] - t[a][1] + t[a][2]);
        dst[(4 * a + 3) * stride] = t[a][2];
      }
    }
}

void winogradFilterGradTransform(const float* du, int64_t filters, int64_t channels, float* dw) {
  const int64_t stride = filters * channels;
  for (int64_t f = 0; f < filters; ++f)
    for (int64_t c = 0; c < channels; ++c) {
      const float* src = du + f * channels + c;
      float d[4][4];
      for (int xi = 0; xi < 16; ++xi) d[xi / 4][xi % 4] = src[xi * stride];
      float r[3][4];  // G^T du
      for (int b = 0; b < 4; ++b) {
        r[0][b] = d[0][b] + 0.5f * (d[1][b] + d[2][b]);
        r[1][b] = 0.5f * (d[1][b] - d[2][b]);
        r[2][b] = 0.5f * (d[1][b] + d[2][b]) + d[3][b];
      }
      float* k = dw + (f * channels + c) * 9;
      for (int a = 0; a < 3; ++a) {  // (G^T du) G
        k[3 * a + 0] += r[a][0] + 0.5f * (r[a][1] + r[a][2]);
        k[3 * a + 1] += 0.5f * (r[a][1] - r[a][2]);
        k[3 * a + 2] += 0.5f * (r[a][1] + r[a][2]) + r[a][3];
      }
    }
}

void winogradInputTransform(const float* x, int64_t n, const Window2d& g, float* v, int64_t ldv) {
  const Dims d = dims(g);
  const int64_t channels = g.channels, xi_stride = channels * ldv, used = d.tw + 16;
  // A ring of four deinterleaved padded input rows: padded row y in slot y % 4,
  // so each input row is deinterleaved once although tile rows overlap by two.
  alignas(32) float e[4][kRowFloats], o[4][kRowFloats];
  std::memset(e, 0, sizeof(e));
  std::memset(o, 0, sizeof(o));
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      const float* plane = x + (s * channels + c) * d.h * d.w;
      auto load_row = [&](int64_t y) {
        const int64_t iy = y - d.p;
        if (iy >= 0 && iy < d.h) {
          fillRow(plane + iy * d.w, d.w, d.q, e[y % 4], o[y % 4]);
        } else {
          std::memset(e[y % 4], 0, sizeof(float) * used);
          std::memset(o[y % 4], 0, sizeof(float) * used);
        }
      };
      load_row(0);
      load_row(1);
      float* row_start = v + c * ldv;
      const float* row_end = row_start + n * d.t;  // this call's part of the (xi, c) rows
      for (int64_t ti = 0; ti < d.th; ++ti) {
        load_row(2 * ti + 2);
        load_row(2 * ti + 3);
        float* dst = row_start + s * d.t + ti * d.tw;
        for (int64_t jc = 0; jc < d.tw; jc += 8) {
          V8 h[4][4];  // d B, row by row
          for (int a = 0; a < 4; ++a) {
            const float* er = e[(2 * ti + a) % 4] + jc;
            const float* orow = o[(2 * ti + a) % 4] + jc;
            const V8 d0 = simd::load(er), d1 = simd::load(orow), d2 = simd::load(er + 1), d3 = simd::load(orow + 1);
            h[a][0] = d0 - d2;
            h[a][1] = d1 + d2;
            h[a][2] = d2 - d1;
            h[a][3] = d1 - d3;
          }
          const int64_t valid = d.tw - jc;
          for (int b = 0; b < 4; ++b) {  // B^T (d B)
            float* p = dst + jc + b * xi_stride;
            const float* end = row_end + b * xi_stride;
            storeSpill(p, h[0][b] - h[2][b], valid, end);
            storeSpill(p + 4 * xi_stride, h[1][b] + h[2][b], valid, end + 4 * xi_stride);
            storeSpill(p + 8 * xi_stride, h[2][b] - h[1][b], valid, end + 8 * xi_stride);
            storeSpill(p + 12 * xi_stride, h[1][b] - h[3][b], valid, end + 12 * xi_stride);
          }
        }
      }
    }
}

void winogradOutputTransform(const float* m, int64_t ldm, int64_t n, int64_t filters, const Window2d& g,
                             const float* bias, bool relu, float* y) {
  const Dims d = dims(g);
  const int64_t xi_stride = filters * ldm;
  const float* y_end = y + n * filters * d.ho * d.wo;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t f = 0; f < filters; ++f) {
      float* yp = y + (s * filters + f) * d.ho * d.wo;
      const V8 b = simd::broadcast(bias ? bias[f] : 0.0f);
      for (int64_t ti = 0; ti < d.th; ++ti) {
        const float* src = m + f * ldm + s * d.t + ti * d.tw;
        float* row0 = yp + 2 * ti * d.wo;
        const bool has_row1 = 2 * ti + 1 < d.ho;
        // Right to left: a chunk writes two output rows, so the partial last
        // chunk goes first and its spill into the next row is overwritten later.
        for (int64_t jc = (d.tw - 1) / 8 * 8; jc >= 0; jc -= 8) {
          const int64_t valid = d.tw - jc;
          V8 t[2][4];  // A^T M
          for (int col = 0; col < 4; ++col) {
            const V8 m0 = simd::loadN(src + (0 + col) * xi_stride + jc, valid);
            const V8 m1 = simd::loadN(src + (4 + col) * xi_stride + jc, valid);
            const V8 m2 = simd::loadN(src + (8 + col) * xi_stride + jc, valid);
            const V8 m3 = simd::loadN(src + (12 + col) * xi_stride + jc, valid);
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
            storeSpill(dst, lo, left, y_end);
            if (left > 8) storeSpill(dst + 8, hi, left - 8, y_end);
          }
        }
      }
    }
}

void winogradGradOutputTransform(const float* dy, const float* relu_out, int64_t n, int64_t filters,
                                 const Window2d& g, float* z, int64_t ldz) {
  const Dims d = dims(g);
  const int64_t xi_stride = filters * ldz;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t f = 0; f < filters; ++f) {
      const int64_t plane = (s * filters + f) * d.ho * d.wo;
      float* row_start = z + f * ldz;
      const float* row_end = row_start + n * d.t;
      for (int64_t ti = 0; ti < d.th; ++ti) {
        float* dst = row_start + s * d.t + ti * d.tw;
        for (int64_t jc = 0; jc < d.tw; jc += 8) {
          // g[r][c]: dy at output row 2ti+r, column 2(jc+lane)+c.
          V8 gv[2][2];
          for (int r = 0; r < 2; ++r) {
            const int64_t oy = 2 * ti + r;
            if (oy >= d.ho) {
              gv[r][0] = gv[r][1] = simd::zero();
              continue;
            }
            const int64_t at = plane + oy * d.wo + 2 * jc, left = d.wo - 2 * jc;
            V8 lo = simd::loadN(dy + at, left), hi = simd::loadN(dy + at + 8, left - 8);
            if (relu_out) {
              lo = simd::wherePositive(simd::loadN(relu_out + at, left), lo);
              hi = simd::wherePositive(simd::loadN(relu_out + at + 8, left - 8), hi);
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
          for (int a = 0; a < 4; ++a) {  // (A g) A^T
            float* p = dst + jc + 4 * a * xi_stride;
            const float* end = row_end + 4 * a * xi_stride;
            storeSpill(p, t[a][0], valid, end);
            storeSpill(p + xi_stride, t[a][0] + t[a][1], valid, end + xi_stride);
            storeSpill(p + 2 * xi_stride, t[a][0] - t[a][1], valid, end + 2 * xi_stride);
            storeSpill(p + 3 * xi_stride, -t[a][1], valid, end + 3 * xi_stride);
          }
        }
      }
    }
}

void winogradGradInputTransform(const float* dv, int64_t ldv, int64_t n, const Window2d& g, float* dx) {
  const Dims d = dims(g);
  const int64_t channels = g.channels, xi_stride = channels * ldv;
  const float* dx_end = dx + n * channels * d.h * d.w;
  // A ring of four deinterleaved padded rows: padded row y lives in slot y % 4.
  // Tile row ti touches rows 2ti..2ti+3; after it, rows 2ti and 2ti+1 are final.
  alignas(32) float e[4][kRowFloats], o[4][kRowFloats];
  const int64_t used = d.tw + 16;  // entries the accumulation and emitRow can touch
  auto emit = [&](float* dxp, int64_t y) {
    const int64_t iy = y - d.p;
    if (iy >= 0 && iy < d.h) emitRow(e[y % 4], o[y % 4], d.w, d.q, dxp + iy * d.w, dx_end);
    std::memset(e[y % 4], 0, sizeof(float) * used);
    std::memset(o[y % 4], 0, sizeof(float) * used);
  };
  std::memset(e, 0, sizeof(e));
  std::memset(o, 0, sizeof(o));
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      float* dxp = dx + (s * channels + c) * d.h * d.w;
      for (int64_t ti = 0; ti < d.th; ++ti) {
        const float* src = dv + c * ldv + s * d.t + ti * d.tw;
        for (int64_t jc = 0; jc < d.tw; jc += 8) {
          const int64_t valid = d.tw - jc;  // lanes past it load as zero and add nothing
          V8 r[4][4];                       // B dv
          for (int b = 0; b < 4; ++b) {
            const V8 v0 = simd::loadN(src + (0 + b) * xi_stride + jc, valid);
            const V8 v1 = simd::loadN(src + (4 + b) * xi_stride + jc, valid);
            const V8 v2 = simd::loadN(src + (8 + b) * xi_stride + jc, valid);
            const V8 v3 = simd::loadN(src + (12 + b) * xi_stride + jc, valid);
            r[0][b] = v0;
            r[1][b] = v1 - v2 + v3;
            r[2][b] = v1 + v2 - v0;
            r[3][b] = -v3;
          }
          for (int a = 0; a < 4; ++a) {  // (B dv) B^T, added at padded row 2ti+a
            float* er = e[(2 * ti + a) % 4] + jc;
            float* orow = o[(2 * ti + a) % 4] + jc;
            simd::store(er, simd::load(er) + r[a][0]);
            simd::store(orow, simd::load(orow) + (r[a][1] - r[a][2] + r[a][3]));
            simd::store(er + 1, simd::load(er + 1) + (r[a][1] + r[a][2] - r[a][0]));
            simd::store(orow + 1, simd::load(orow + 1) - r[a][3]);
          }
        }
        emit(dxp, 2 * ti);
        emit(dxp, 2 * ti + 1);
      }
      emit(dxp, 2 * d.th);
      emit(dxp, 2 * d.th + 1);
    }
}

}  // namespace dtrain::ops
