// Depthwise 3x3, stride 1, padding 1 (output plane = input plane size).
//
// Each plane is first copied into a zero-padded buffer (one copy ahead of its
// use, two buffers, so the unaligned loads never wait on the copy's stores
// still in flight). Two layouts, by row length W:
//   Rows (W >= 8): padded rows (a zero column each side, zero rows above and
//     below), vectors along rows, and two output rows per step: they share
//     two of their four input rows, so a vector of outputs costs 6 loads, not 9.
//   Flat (W < 8, MobileNet's 6x6 and 3x3 planes): vectors along the
//     flattened plane, so short rows still fill them: output q reads input
//     q + (i-1)*W + (j-1). Zero margins of W+1 floats supply the padding
//     rows; the padding columns are lane masks (a left tap dropped in column
//     0, a right tap in column W-1), one period of them per call.
// The input gradient is the same correlation of dy with the filter turned by
// 180 degrees; the weight gradient pairs each dy vector with the nine
// shifted input vectors.
#include <algorithm>
#include <numeric>

#include "core/backend/cpu/depthwise_kernels.h"

namespace dtrain::ops::depthwise {

namespace {

// The 3x3 taps in registers (a Taps is in memory, which every store in the
// loop could alias).
struct TapRegs {
  V8 k0, k1, k2, k3, k4, k5, k6, k7, k8;
  explicit TapRegs(const Taps& t)
      : k0(t.k[0]),
        k1(t.k[1]),
        k2(t.k[2]),
        k3(t.k[3]),
        k4(t.k[4]),
        k5(t.k[5]),
        k6(t.k[6]),
        k7(t.k[7]),
        k8(t.k[8]) {}
};

// The weight gradient of one filter as nine vector sums and the bias sum.
struct GradSums {
  V8 t[9], bias;
  GradSums() {
    for (V8& a : t) a = simd::zero();
    bias = simd::zero();
  }
  void addTo(float* dw, float* dbias) const {
    addSums8(t, dw);
    dw[8] += sum(t[8]);
    if (dbias) *dbias += sum(bias);
  }
};

struct Rows {
  int64_t h, w, size;
  int64_t stride;  // padded row: a zero column, the W values, zeros to the last vector's reach
  int64_t buffer;  // rows h + 3: padding above, the data, padding below and one more for an odd h

  explicit Rows(const Window2d& g)
      : h(g.height), w(g.width), size(h * w), stride(roundUp8(w) + 8), buffer((h + 3) * stride) {}
  int64_t scratchFloats() const { return 4 * buffer; }

  // Plane row r -> buffer row r + 1 from column 1 (zeros after it to the vector's end).
  void copy(const float* src, const float* relu_out, float* buf) const {
    for (int64_t r = 0; r < h; ++r)
      copyPadded(src + r * w, relu_out ? relu_out + r * w : nullptr, w, buf + (r + 1) * stride + 1);
  }

  // dst = act(correlation + bias), or dst += the correlation when kAccumulate.
  // `room`: floats writable at dst; where it exceeds the plane, stores may
  // spill (into planes written later).
  template <bool kRelu, bool kAccumulate>
  void correlate(const float* buf, const Taps& taps, float bias, float* dst, int64_t room) const {
    const TapRegs k(taps);
    const V8 b = simd::broadcast(bias);
    for (int64_t oy = 0; oy < h; oy += 2) {
      const bool pair = oy + 1 < h;
      for (int64_t ox = 0; ox < w; ox += 8) {
        const float* p = buf + oy * stride + ox;  // padded rows oy .. oy+3
        V8 u = mulAdd(k.k0, simd::load(p), b);
        u = mulAdd(k.k1, simd::load(p + 1), u);
        u = mulAdd(k.k2, simd::load(p + 2), u);
        p += stride;
        V8 x0 = simd::load(p), x1 = simd::load(p + 1), x2 = simd::load(p + 2);
        u = mulAdd(k.k3, x0, u);
        V8 v = mulAdd(k.k0, x0, b);
        u = mulAdd(k.k4, x1, u);
        v = mulAdd(k.k1, x1, v);
        u = mulAdd(k.k5, x2, u);
        v = mulAdd(k.k2, x2, v);
        p += stride;
        x0 = simd::load(p), x1 = simd::load(p + 1), x2 = simd::load(p + 2);
        u = mulAdd(k.k6, x0, u);
        v = mulAdd(k.k3, x0, v);
        u = mulAdd(k.k7, x1, u);
        v = mulAdd(k.k4, x1, v);
        u = mulAdd(k.k8, x2, u);
        v = mulAdd(k.k5, x2, v);
        p += stride;
        v = mulAdd(k.k6, simd::load(p), v);
        v = mulAdd(k.k7, simd::load(p + 1), v);
        v = mulAdd(k.k8, simd::load(p + 2), v);
        // Row oy's surplus lanes would land on row oy+1's values already
        // stored: exact stores there; row oy+1's may spill into row oy+2.
        const int64_t at = oy * w + ox, exact = std::min<int64_t>(8, w - ox);
        put<kRelu, kAccumulate>(dst + at, u, pair || kAccumulate ? exact : room - at);
        if (pair) put<kRelu, kAccumulate>(dst + at + w, v, kAccumulate ? exact : room - at - w);
      }
    }
  }

  // Nine tap sums over the plane, two dy rows per step. dy lanes past a row,
  // and the row after an odd h, are zero.
  void weightGrad(const float* xbuf, const float* dbuf, GradSums& g) const {
    V8 a0 = g.t[0], a1 = g.t[1], a2 = g.t[2], a3 = g.t[3], a4 = g.t[4], a5 = g.t[5], a6 = g.t[6], a7 = g.t[7],
       a8 = g.t[8], ab = g.bias;
    for (int64_t oy = 0; oy < h; oy += 2)
      for (int64_t ox = 0; ox < w; ox += 8) {
        const V8 d0 = simd::load(dbuf + (oy + 1) * stride + ox + 1);
        const V8 d1 = simd::load(dbuf + (oy + 2) * stride + ox + 1);
        ab = ab + d0 + d1;
        const float* p = xbuf + oy * stride + ox;
        V8 x0 = simd::load(p), x1 = simd::load(p + 1), x2 = simd::load(p + 2);
        a0 = mulAdd(d0, x0, a0);
        a1 = mulAdd(d0, x1, a1);
        a2 = mulAdd(d0, x2, a2);
        p += stride;
        x0 = simd::load(p), x1 = simd::load(p + 1), x2 = simd::load(p + 2);
        a3 = mulAdd(d0, x0, a3);
        a4 = mulAdd(d0, x1, a4);
        a5 = mulAdd(d0, x2, a5);
        a0 = mulAdd(d1, x0, a0);
        a1 = mulAdd(d1, x1, a1);
        a2 = mulAdd(d1, x2, a2);
        p += stride;
        x0 = simd::load(p), x1 = simd::load(p + 1), x2 = simd::load(p + 2);
        a6 = mulAdd(d0, x0, a6);
        a7 = mulAdd(d0, x1, a7);
        a8 = mulAdd(d0, x2, a8);
        a3 = mulAdd(d1, x0, a3);
        a4 = mulAdd(d1, x1, a4);
        a5 = mulAdd(d1, x2, a5);
        p += stride;
        a6 = mulAdd(d1, simd::load(p), a6);
        a7 = mulAdd(d1, simd::load(p + 1), a7);
        a8 = mulAdd(d1, simd::load(p + 2), a8);
      }
    const V8 t[9] = {a0, a1, a2, a3, a4, a5, a6, a7, a8};
    std::copy(t, t + 9, g.t);
    g.bias = ab;
  }

  template <bool kRelu, bool kAccumulate>
  static void put(float* dst, V8 v, int64_t n) {
    if (kRelu) v = simd::max0(v);
    if (kAccumulate) v = v + simd::loadN(dst, n);
    simd::storeN(dst, v, n);
  }
};

struct Flat {
  int64_t w, size;
  int64_t front;                // zeros before the plane (>= W+1, whole vectors)
  int64_t buffer;               // floats per buffer: margins included
  int64_t period;               // lane masks repeat every `period` floats of q (a multiple of 8 and of W)
  const float* left = nullptr;  // lane masks, from prepare()
  const float* right = nullptr;

  explicit Flat(const Window2d& g)
      : w(g.width),
        size(g.inPlane()),
        front(roundUp8(g.width + 1)),
        // The last vector reads up to 7 lanes past the plane, plus W+1.
        buffer(roundUp8(front + size + g.width + 8)),
        period(std::lcm<int64_t>(g.width, 8)) {}
  int64_t scratchFloats() const { return 4 * buffer + 2 * period; }
  // The masks go after the four buffers.
  void prepare(float* scratch) {
    float* l = scratch + 4 * buffer;
    float* r = l + period;
    for (int64_t q = 0; q < period; ++q) {
      l[q] = laneMask(q % w != 0);
      r[q] = laneMask(q % w != w - 1);
    }
    left = l;
    right = r;
  }

  // The plane at `front` (zeros after it to the vector's end).
  void copy(const float* src, const float* relu_out, float* buf) const {
    copyPadded(src, relu_out, size, buf + front);
  }

  template <bool kRelu, bool kAccumulate>
  void correlate(const float* buf, const Taps& taps, float bias, float* dst, int64_t room) const {
    const TapRegs k(taps);
    const V8 b = simd::broadcast(bias);
    const float* src = buf + front;
    const float* lm = left;
    const float* rm = right;
    const int64_t w = this->w, size = this->size, period = this->period;
    for (int64_t q = 0, m = 0; q < size; q += 8) {
      const float* p = src + q;
      V8 l = mul(k.k0, simd::load(p - w - 1));
      V8 c = mulAdd(k.k1, simd::load(p - w), b);
      V8 r = mul(k.k2, simd::load(p - w + 1));
      l = mulAdd(k.k3, simd::load(p - 1), l);
      c = mulAdd(k.k4, simd::load(p), c);
      r = mulAdd(k.k5, simd::load(p + 1), r);
      l = mulAdd(k.k6, simd::load(p + w - 1), l);
      c = mulAdd(k.k7, simd::load(p + w), c);
      r = mulAdd(k.k8, simd::load(p + w + 1), r);
      V8 v = c + select(l, simd::load(lm + m)) + select(r, simd::load(rm + m));
      if (kRelu) v = simd::max0(v);
      if (kAccumulate) v = v + simd::loadN(dst + q, size - q);
      simd::storeN(dst + q, v, (kAccumulate ? size : room) - q);
      m = m + 8 == period ? 0 : m + 8;
    }
  }

  // d is zero past the plane.
  void weightGrad(const float* xbuf, const float* dbuf, GradSums& g) const {
    const float* x = xbuf + front;
    const float* d = dbuf + front;
    const int64_t w = this->w, size = this->size, period = this->period;
    V8 a0 = g.t[0], a1 = g.t[1], a2 = g.t[2], a3 = g.t[3], a4 = g.t[4], a5 = g.t[5], a6 = g.t[6], a7 = g.t[7],
       a8 = g.t[8], ab = g.bias;
    for (int64_t q = 0, m = 0; q < size; q += 8) {
      const V8 dc = simd::load(d + q);
      const V8 dl = select(dc, simd::load(left + m)), dr = select(dc, simd::load(right + m));
      const float* p = x + q;
      a0 = mulAdd(dl, simd::load(p - w - 1), a0);
      a1 = mulAdd(dc, simd::load(p - w), a1);
      a2 = mulAdd(dr, simd::load(p - w + 1), a2);
      a3 = mulAdd(dl, simd::load(p - 1), a3);
      a4 = mulAdd(dc, simd::load(p), a4);
      a5 = mulAdd(dr, simd::load(p + 1), a5);
      a6 = mulAdd(dl, simd::load(p + w - 1), a6);
      a7 = mulAdd(dc, simd::load(p + w), a7);
      a8 = mulAdd(dr, simd::load(p + w + 1), a8);
      ab = ab + dc;
      m = m + 8 == period ? 0 : m + 8;
    }
    const V8 t[9] = {a0, a1, a2, a3, a4, a5, a6, a7, a8};
    std::copy(t, t + 9, g.t);
    g.bias = ab;
  }
};

bool rowsLayout(const Window2d& g) { return g.width >= 8; }

// Planes are visited in memory order (sample by sample), so every stream is
// sequential, and a plane after the current one is written later (`room`).
template <typename Layout>
void forward(const Layout& L, const float* x, int64_t n, const Window2d& g, int64_t m, const float* w,
             const float* bias, bool relu, float* y, float* scratch) {
  std::fill(scratch, scratch + 2 * L.buffer, 0.0f);  // the padding stays zero
  float* slot[2] = {scratch, scratch + L.buffer};
  const int64_t inputs = n * g.channels, size = L.size;
  if (inputs) L.copy(x, nullptr, slot[0]);
  for (int64_t p = 0; p < inputs; ++p) {
    if (p + 1 < inputs) L.copy(x + (p + 1) * size, nullptr, slot[(p + 1) & 1]);
    for (int64_t k = 0; k < m; ++k) {
      const int64_t o = p * m + k, filter = (p % g.channels) * m + k;
      const Taps taps(w + filter * 9);
      const float b = bias ? bias[filter] : 0.0f;
      const int64_t room = size + std::min<int64_t>(8, (inputs * m - 1 - o) * size);
      if (relu)
        L.template correlate<true, false>(slot[p & 1], taps, b, y + o * size, room);
      else
        L.template correlate<false, false>(slot[p & 1], taps, b, y + o * size, room);
    }
  }
}

template <typename Layout>
void backward(const Layout& L, const float* x, const float* relu_out, const float* dy, int64_t n,
              const Window2d& g, int64_t m, const float* w, float* dw, float* dbias, float* dx,
              float* scratch) {
  std::fill(scratch, scratch + 4 * L.buffer, 0.0f);
  float* xs[2] = {scratch, scratch + L.buffer};
  float* ds[2] = {scratch + 2 * L.buffer, scratch + 3 * L.buffer};
  const int64_t inputs = n * g.channels, outputs = inputs * m, size = L.size;
  // Output plane o reads input plane o / m; the copies run one plane ahead.
  auto copy = [&](int64_t o) {
    L.copy(dy + o * size, relu_out ? relu_out + o * size : nullptr, ds[o & 1]);
    if (o % m == 0) L.copy(x + (o / m) * size, nullptr, xs[(o / m) & 1]);
  };
  if (outputs) copy(0);
  for (int64_t o = 0; o < outputs; ++o) {
    if (o + 1 < outputs) copy(o + 1);
    const int64_t p = o / m, k = o % m, filter = (p % g.channels) * m + k;
    GradSums sums;
    L.weightGrad(xs[p & 1], ds[o & 1], sums);
    sums.addTo(dw + filter * 9, dbias ? dbias + filter : nullptr);
    if (!dx) continue;
    float turned[9];  // the input gradient correlates with the filter turned by 180 degrees
    for (int t = 0; t < 9; ++t) turned[t] = w[filter * 9 + 8 - t];
    const Taps taps(turned);
    float* out = dx + p * size;
    if (k == 0)
      L.template correlate<false, false>(ds[o & 1], taps, 0.0f, out,
                                         size + std::min<int64_t>(8, (inputs - 1 - p) * size));
    else  // the multiplier's further filters add to the same input plane
      L.template correlate<false, true>(ds[o & 1], taps, 0.0f, out, size);
  }
}

}  // namespace

int64_t stride1ScratchFloats(const Window2d& g) {
  return rowsLayout(g) ? Rows(g).scratchFloats() : Flat(g).scratchFloats();
}

void forwardStride1(const float* x, int64_t n, const Window2d& g, int64_t m, const float* w,
                    const float* bias, bool relu, float* y, float* scratch) {
  if (rowsLayout(g)) return forward(Rows(g), x, n, g, m, w, bias, relu, y, scratch);
  Flat flat(g);
  flat.prepare(scratch);
  forward(flat, x, n, g, m, w, bias, relu, y, scratch);
}

void backwardStride1(const float* x, const float* relu_out, const float* dy, int64_t n, const Window2d& g,
                     int64_t m, const float* w, float* dw, float* dbias, float* dx, float* scratch) {
  if (rowsLayout(g)) return backward(Rows(g), x, relu_out, dy, n, g, m, w, dw, dbias, dx, scratch);
  Flat flat(g);
  flat.prepare(scratch);
  backward(flat, x, relu_out, dy, n, g, m, w, dw, dbias, dx, scratch);
}

}  // namespace dtrain::ops::depthwise
