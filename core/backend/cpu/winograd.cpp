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
// Padded rows are split into even and odd columns, E[j] = column 2j and
// O[j] = column 2j+1, so tile j's four columns are E[j], O[j], E[j+1], O[j+1].
// The "+1" neighbours come from lane shifts in registers, never from loads at
// odd offsets: a load that straddles a just-stored vector cannot be forwarded
// from the store buffer and stalls. Row buffers live on the stack, which bounds
// the padded width (kWinogradMaxPaddedWidth); wider inputs use im2col.
#include <cstring>

#include "core/backend/cpu/vec8.h"
#include "core/backend/ops.h"

namespace dtrain::ops {

using simd::V8;

namespace {

// A split row: entries [0, tilesW + 1) rounded up to vectors, plus two vectors
// of slack (the k+1 loads and the carry of the gradient accumulation).
constexpr int64_t kRowFloats = kWinogradMaxPaddedWidth / 2 + 32;

struct Dims {
  int64_t h, w, ho, wo, p, q, th, tw, t;
  int64_t used;  // split-row entries any kernel touches
};

Dims dims(const Window2d& g) {
  const WinogradTiles tiles = winogradTiles(g);
  const int64_t tw = tiles.cols;
  return {g.height, g.width, g.outHeight(), g.outWidth(), g.pad_h, g.pad_w, tiles.rows, tw,
          tiles.perSample(), (tw + 7) / 8 * 8 + 16};
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

// Splits an input row: ev[k] = row[2k], od[k] = row[2k+1], zero past w.
// Entries past the last vector written stay as they are (zero: buffers start
// zeroed and every split of the call writes the same entries).
void splitRow(const float* row, int64_t w, float* ev, float* od) {
  for (int64_t k = 0; 2 * k < w; k += 8) {
    V8 a, b;
    simd::deinterleave(simd::loadN(row + 2 * k, w - 2 * k), simd::loadN(row + 2 * k + 8, w - 2 * k - 8), a, b);
    simd::store(ev + k, a);
    simd::store(od + k, b);
  }
}

// The padded columns 2j, 2j+1, 2j+2, 2j+3 of tiles j = jc..jc+7, from a split
// row and the left padding q (padded column X is input column X - q).
struct TileColumns {
  V8 d0, d1, d2, d3;
};
inline TileColumns tileColumns(const float* ev, const float* od, int64_t jc, int64_t q) {
  const V8 ev0 = simd::load(ev + jc), od0 = simd::load(od + jc);
  if (q == 0) {
    const V8 ev1 = simd::load(ev + jc + 8), od1 = simd::load(od + jc + 8);
    return {ev0, od0, simd::shiftDown(ev0, ev1), simd::shiftDown(od0, od1)};
  }
  if (q == 1) {  // column 2j is input 2j - 1 = od[j - 1]
    const V8 odm = jc ? simd::load(od + jc - 8) : simd::zero(), ev1 = simd::load(ev + jc + 8);
    return {simd::shiftUp(od0, odm), ev0, od0, simd::shiftDown(ev0, ev1)};
  }
  // q == 2: column 2j is input 2j - 2 = ev[j - 1]
  const V8 evm = jc ? simd::load(ev + jc - 8) : simd::zero(), odm = jc ? simd::load(od + jc - 8) : simd::zero();
  return {simd::shiftUp(ev0, evm), simd::shiftUp(od0, odm), ev0, od0};
}

// dx row (w floats) from padded-row accumulators: dx[ix] = padded[ix + q].
void emitRow(const float* e, const float* o, int64_t w, int64_t q, float* dx, const float* end) {
  for (int64_t j = 0; 2 * j < w; j += 8) {
    const V8 e0 = simd::load(e + j), o0 = simd::load(o + j);
    V8 first = e0, second = o0;  // q == 0: (E[j], O[j])
    if (q == 1) {                // (O[j], E[j+1])
      first = o0;
      second = simd::shiftDown(e0, simd::load(e + j + 8));
    } else if (q == 2) {  // (E[j+1], O[j+1])
      first = simd::shiftDown(e0, simd::load(e + j + 8));
      second = simd::shiftDown(o0, simd::load(o + j + 8));
    }
    V8 lo, hi;
    simd::interleave(first, second, lo, hi);
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

int64_t winogradPlaneStride(int64_t rows, int64_t ld) {
  // The 16 planes are read and written together; a stride that is an odd
  // multiple of 64 bytes spreads them over 16 different L1 sets instead of
  // piling them into one (a multiple of 4 KiB would).
  int64_t plane = (rows * ld + 15) / 16 * 16;
  if ((plane / 16) % 2 == 0) plane += 16;
  return plane;
}

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

void winogradInputTransform(const float* x, int64_t n, const Window2d& g, float* v, int64_t ldv, int64_t plane) {
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
          for (int b = 0; b < 4; ++b) {  // B^T (d B)
            float* p = dst + jc + b * plane;
            const float* end = row_end + b * plane;
            storeSpill(p, h[0][b] - h[2][b], valid, end);
            storeSpill(p + 4 * plane, h[1][b] + h[2][b], valid, end + 4 * plane);
            storeSpill(p + 8 * plane, h[2][b] - h[1][b], valid, end + 8 * plane);
            storeSpill(p + 12 * plane, h[1][b] - h[3][b], valid, end + 12 * plane);
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
        // Right to left: a chunk writes two output rows, so the partial last
        // chunk goes first and its spill into the next row is overwritten later.
        for (int64_t jc = (d.tw - 1) / 8 * 8; jc >= 0; jc -= 8) {
          const int64_t valid = d.tw - jc;
          V8 t[2][4];  // A^T M
          for (int col = 0; col < 4; ++col) {
            const V8 m0 = simd::loadN(src + (0 + col) * plane + jc, valid);
            const V8 m1 = simd::loadN(src + (4 + col) * plane + jc, valid);
            const V8 m2 = simd::loadN(src + (8 + col) * plane + jc, valid);
            const V8 m3 = simd::loadN(src + (12 + col) * plane + jc, valid);
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
          // gv[r][c]: dy at output row 2ti+r, column 2(jc+lane)+c.
          V8 gv[2][2];
          for (int r = 0; r < 2; ++r) {
            const int64_t oy = 2 * ti + r;
            if (oy >= d.ho) {
              gv[r][0] = gv[r][1] = simd::zero();
              continue;
            }
            const int64_t at = src + oy * d.wo + 2 * jc, left = d.wo - 2 * jc;
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
            float* p = dst + jc + 4 * a * plane;
            const float* end = row_end + 4 * a * plane;
            storeSpill(p, t[a][0], valid, end);
            storeSpill(p + plane, t[a][0] + t[a][1], valid, end + plane);
            storeSpill(p + 2 * plane, t[a][0] - t[a][1], valid, end + 2 * plane);
            storeSpill(p + 3 * plane, -t[a][1], valid, end + 3 * plane);
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
          const int64_t valid = d.tw - jc;  // lanes past it load as zero and add nothing
          V8 r[4][4];                       // B dv
          for (int b = 0; b < 4; ++b) {
            const V8 v0 = simd::loadN(src + (0 + b) * plane + jc, valid);
            const V8 v1 = simd::loadN(src + (4 + b) * plane + jc, valid);
            const V8 v2 = simd::loadN(src + (8 + b) * plane + jc, valid);
            const V8 v3 = simd::loadN(src + (12 + b) * plane + jc, valid);
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
