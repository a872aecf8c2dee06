// Depthwise 3x3, stride 2, padding 1 (the MobileNet down-sampling blocks).
//
// Vectorised along output rows, 8 outputs per vector. Each input plane is
// copied into a zero-padded buffer (one padding row and column before the
// data, zeros after it to the last vector's reach), so the 16 padded columns
// 2*ox .. 2*ox+15 of 8 outputs are two aligned loads; their even and odd
// elements are taps 0 and 1, and the even elements of the 16 columns two
// further on are tap 2. The split leaves lanes in pair order (see
// depthwise_kernels.h), which products keep, so each output vector is
// reordered once.
//
// The input gradient is gathered per input row: an even input row (column)
// takes the middle filter row (column) from one dy row (column), an odd one
// the outer two from its two neighbours; even and odd results are interleaved
// into the row. dy planes are copied, masked by a fused relu, into buffers
// with a zero row above and below and zeros to the right, so no edge needs a
// branch. Planes are copied one ahead of their use, as in the stride-1 path.
#include <algorithm>

#include "core/backend/cpu/depthwise_kernels.h"

namespace dtrain::ops::depthwise {

namespace {

struct Padded {
  int64_t h = 0, w = 0, ho = 0, wo = 0;
  int64_t xw = 0, xsize = 0;  // input buffer: row length, floats (rows h + 2)
  int64_t dw = 0, dsize = 0;  // dy buffer: row length, floats (rows ho + 2)

  explicit Padded(const Window2d& g) : h(g.height), w(g.width), ho(g.outHeight()), wo(g.outWidth()) {
    const int64_t last = (wo - 1) / 8 * 8;  // first output of the last vector of a row
    xw = roundUp8(2 * last + 18);           // its reach: padded columns up to 2*last + 17
    xsize = (h + 2) * xw;
    dw = last + 16;  // the input gradient's dy loads reach last + 8
    dsize = (ho + 2) * dw;
  }
};

struct Scratch {
  float* x[2];  // padded input planes
  float* d[2];  // padded, masked dy planes
};

Scratch carve(const Padded& pd, float* scratch, bool with_dy) {
  const int64_t floats = 2 * pd.xsize + (with_dy ? 2 * pd.dsize : 0);
  std::fill(scratch, scratch + floats, 0.0f);  // only the data regions are written later
  Scratch s;
  s.x[0] = scratch;
  s.x[1] = scratch + pd.xsize;
  s.d[0] = with_dy ? scratch + 2 * pd.xsize : nullptr;
  s.d[1] = with_dy ? s.d[0] + pd.dsize : nullptr;
  return s;
}

void copyInput(const float* src, const Padded& pd, float* buf) {
  for (int64_t r = 0; r < pd.h; ++r) copyPadded(src + r * pd.w, nullptr, pd.w, buf + (r + 1) * pd.xw + 1);
}

void copyDy(const float* dy, const float* relu_out, const Padded& pd, float* buf) {
  for (int64_t r = 0; r < pd.ho; ++r)
    copyPadded(dy + r * pd.wo, relu_out ? relu_out + r * pd.wo : nullptr, pd.wo, buf + (r + 1) * pd.dw);
}

// The three taps of one padded row for outputs ox0..ox0+7, in pair order.
struct RowTaps {
  V8 left, middle, right;
};
inline RowTaps rowTaps(const float* row) {
  const V8 a = simd::load(row), b = simd::load(row + 8);
  return {evens(a, b), odds(a, b), evens(simd::load(row + 2), simd::load(row + 10))};
}

// `room`: floats writable at out (beyond the plane: planes written later).
template <bool kRelu>
void forwardPlane(const float* buf, const Padded& pd, const Taps& taps, float bias, float* out,
                  int64_t room) {
  const Taps t = taps;  // a local copy stays in registers: no store in the loop can alias it
  const V8 b = simd::broadcast(bias);
  for (int64_t oy = 0; oy < pd.ho; ++oy) {
    const float* rows = buf + 2 * oy * pd.xw;  // padded rows 2*oy .. 2*oy+2
    for (int64_t ox = 0; ox < pd.wo; ox += 8) {
      const RowTaps r0 = rowTaps(rows + 2 * ox), r1 = rowTaps(rows + pd.xw + 2 * ox),
                    r2 = rowTaps(rows + 2 * pd.xw + 2 * ox);
      V8 a = mulAdd(t.k[0], r0.left, b), c = mul(t.k[3], r1.left), e = mul(t.k[6], r2.left);
      a = mulAdd(t.k[1], r0.middle, a);
      c = mulAdd(t.k[4], r1.middle, c);
      e = mulAdd(t.k[7], r2.middle, e);
      a = mulAdd(t.k[2], r0.right, a);
      c = mulAdd(t.k[5], r1.right, c);
      e = mulAdd(t.k[8], r2.right, e);
      V8 v = swapPairOrder(a + c + e);
      if (kRelu) v = simd::max0(v);
      // Surplus lanes land in the next row (or plane), which is written later.
      const int64_t at = oy * pd.wo + ox;
      simd::storeN(out + at, v, std::min(pd.wo - ox + 8, room - at));
    }
  }
}

// The weight and bias gradient of one plane (dy zero past each row).
void weightGradPlane(const float* xbuf, const float* dbuf, const Padded& pd, float* dw, float* dbias) {
  V8 tap[9], bias = simd::zero();
  for (V8& a : tap) a = simd::zero();
  for (int64_t oy = 0; oy < pd.ho; ++oy) {
    const float* rows = xbuf + 2 * oy * pd.xw;
    const float* drow = dbuf + (oy + 1) * pd.dw;
    for (int64_t ox = 0; ox < pd.wo; ox += 8) {
      const V8 d = simd::load(drow + ox);
      bias = bias + d;
      const V8 dp = swapPairOrder(d);
      for (int i = 0; i < 3; ++i) {
        const RowTaps r = rowTaps(rows + i * pd.xw + 2 * ox);
        tap[3 * i] = mulAdd(dp, r.left, tap[3 * i]);
        tap[3 * i + 1] = mulAdd(dp, r.middle, tap[3 * i + 1]);
        tap[3 * i + 2] = mulAdd(dp, r.right, tap[3 * i + 2]);
      }
    }
  }
  addSums8(tap, dw);
  dw[8] += sum(tap[8]);
  if (dbias) *dbias += sum(bias);
}

// dx plane from one dy buffer; adds to dx when kAccumulate (the depth
// multiplier's further filters), else writes it (`room` as in forwardPlane).
template <bool kAccumulate>
void inputGradPlane(const float* dbuf, const Padded& pd, const Taps& taps, float* dx, int64_t room) {
  const Taps t = taps;
  for (int64_t iy = 0; iy < pd.h; ++iy) {
    float* dst = dx + iy * pd.w;
    // dy row oy sits at buffer row oy + 1; rows -1 and ho are zeros. An even
    // input row meets filter row 1 of dy row iy/2; an odd one filter row 0 of
    // dy row (iy+1)/2 (a) and filter row 2 of dy row (iy-1)/2 (b).
    // (For an even iy the two expressions agree.)
    const bool odd = iy % 2 == 1;
    const float* a = dbuf + ((iy + 1) / 2 + 1) * pd.dw;
    const float* b = dbuf + (iy / 2 + 1) * pd.dw;
    for (int64_t k = 0; 2 * k < pd.w; k += 8) {
      const V8 a0 = simd::load(a + k), a1 = simd::load(a + k + 1);
      V8 even, odd_cols;
      if (odd) {
        const V8 b0 = simd::load(b + k), b1 = simd::load(b + k + 1);
        even = mulAdd(t.k[1], a0, mul(t.k[7], b0));
        odd_cols = mulAdd(t.k[0], a1, mulAdd(t.k[2], a0, mulAdd(t.k[6], b1, mul(t.k[8], b0))));
      } else {
        even = mulAdd(t.k[4], a0, simd::zero());
        odd_cols = mulAdd(t.k[3], a1, mul(t.k[5], a0));
      }
      V8 lo, hi;
      simd::interleave(even, odd_cols, lo, hi);
      const int64_t left = pd.w - 2 * k;
      if (kAccumulate) {
        simd::storeN(dst + 2 * k, lo + simd::loadN(dst + 2 * k, left), left);
        if (left > 8) simd::storeN(dst + 2 * k + 8, hi + simd::loadN(dst + 2 * k + 8, left - 8), left - 8);
        continue;
      }
      const int64_t at = iy * pd.w + 2 * k;
      simd::storeN(dst + 2 * k, lo, std::min(left + 8, room - at));
      if (left > 8) simd::storeN(dst + 2 * k + 8, hi, std::min(left, room - at - 8));
    }
  }
}

}  // namespace

int64_t stride2ScratchFloats(const Window2d& g) {
  const Padded pd(g);
  return 2 * pd.xsize + 2 * pd.dsize;
}

// Planes are visited in memory order, as in the stride-1 path.
void forwardStride2(const float* x, int64_t n, const Window2d& g, int64_t m, const float* w,
                    const float* bias, bool relu, float* y, float* scratch) {
  const Padded pd(g);
  const Scratch s = carve(pd, scratch, false);
  const int64_t inputs = n * g.channels, in_size = pd.h * pd.w, out_size = pd.ho * pd.wo;
  if (inputs) copyInput(x, pd, s.x[0]);
  for (int64_t p = 0; p < inputs; ++p) {
    if (p + 1 < inputs) copyInput(x + (p + 1) * in_size, pd, s.x[(p + 1) & 1]);
    for (int64_t k = 0; k < m; ++k) {
      const int64_t o = p * m + k, filter = (p % g.channels) * m + k;
      const Taps taps(w + filter * 9);
      const float b = bias ? bias[filter] : 0.0f;
      const int64_t room = out_size + std::min<int64_t>(8, (inputs * m - 1 - o) * out_size);
      if (relu)
        forwardPlane<true>(s.x[p & 1], pd, taps, b, y + o * out_size, room);
      else
        forwardPlane<false>(s.x[p & 1], pd, taps, b, y + o * out_size, room);
    }
  }
}

void backwardStride2(const float* x, const float* relu_out, const float* dy, int64_t n, const Window2d& g,
                     int64_t m, const float* w, float* dw, float* dbias, float* dx, float* scratch) {
  const Padded pd(g);
  const Scratch s = carve(pd, scratch, true);
  const int64_t inputs = n * g.channels, outputs = inputs * m;
  const int64_t in_size = pd.h * pd.w, out_size = pd.ho * pd.wo;
  auto copy = [&](int64_t o) {
    copyDy(dy + o * out_size, relu_out ? relu_out + o * out_size : nullptr, pd, s.d[o & 1]);
    if (o % m == 0) copyInput(x + (o / m) * in_size, pd, s.x[(o / m) & 1]);
  };
  if (outputs) copy(0);
  for (int64_t o = 0; o < outputs; ++o) {
    if (o + 1 < outputs) copy(o + 1);
    const int64_t p = o / m, k = o % m, filter = (p % g.channels) * m + k;
    weightGradPlane(s.x[p & 1], s.d[o & 1], pd, dw + filter * 9, dbias ? dbias + filter : nullptr);
    if (!dx) continue;
    const Taps taps(w + filter * 9);
    float* out = dx + p * in_size;
    if (k == 0)
      inputGradPlane<false>(s.d[o & 1], pd, taps, out,
                            in_size + std::min<int64_t>(8, (inputs - 1 - p) * in_size));
    else
      inputGradPlane<true>(s.d[o & 1], pd, taps, out, in_size);
  }
}

}  // namespace dtrain::ops::depthwise
