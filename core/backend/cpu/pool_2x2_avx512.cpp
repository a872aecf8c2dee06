// 2x2 stride-2 max pooling at 512 bits: pool_2x2.cpp's plan (each output
// row's windows deinterleaved from its two input rows, the first maximum
// kept, NaN propagated; backward writing every input element once) with two
// output rows a vector (plane_pairs_avx512.h): the rows of every plane taken
// in order, so the cnn's 14- and 7-wide outputs fill both halves.
#include "core/backend/cpu/cpu_kernels_avx512.h"
#include "core/backend/cpu/plane_pairs_avx512.h"

namespace dtrain::ops::avx512 {

namespace {

using namespace pairs;

// Output row R of all planes' [ho] rows: its input rows and its index base.
struct RowAt {
  int64_t top;   // where input row 2 oy of its plane starts (the next, + w, is the bottom)
  int32_t base;  // 2 oy w: the top row's index within the plane
};
inline RowAt rowAt(int64_t r, int64_t ho, int64_t h, int64_t w) {
  const int64_t plane = r / ho, oy = r % ho;
  return {plane * h * w + 2 * oy * w, static_cast<int32_t>(2 * oy * w)};
}

inline __m512i halvesEpi32(int32_t a, int32_t b) {
  return _mm512_inserti32x8(_mm512_set1_epi32(a), _mm256_set1_epi32(b), 1);
}
inline __m512i loadHalvesEpi32(const int32_t* a, const int32_t* b, __mmask8 m) {
  return _mm512_inserti32x8(_mm512_castsi256_si512(_mm256_maskz_loadu_epi32(m, a)),
                            _mm256_maskz_loadu_epi32(m, b), 1);
}
inline void storeHalvesEpi32(int32_t* a, int32_t* b, __m512i v, __mmask8 m) {
  _mm256_mask_storeu_epi32(a, m, _mm512_castsi512_si256(v));
  if (b) _mm256_mask_storeu_epi32(b, m, _mm512_extracti32x8_epi32(v, 1));
}

// Replaces (best, at) by (v, v_at) where v > best or v is NaN.
inline void takeIfGreater(__m512& best, __m512i& at, __m512 v, __m512i v_at) {
  const __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  best = _mm512_mask_mov_ps(best, take, v);
  at = _mm512_mask_mov_epi32(at, take, v_at);
}

}  // namespace

void maxPool2x2Forward(const float* x, int64_t planes, int64_t h, int64_t w, float* y, int32_t* argmax) {
  const int64_t ho = h / 2, wo = w / 2, rows = planes * ho;
  const __m512i lane2 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14);
  const __m512i one = _mm512_set1_epi32(1), width = _mm512_set1_epi32(static_cast<int32_t>(w));
  for (int64_t ra = 0; ra < rows; ra += 2) {
    const bool two = ra + 1 < rows;
    const RowAt a = rowAt(ra, ho, h, w), b = two ? rowAt(ra + 1, ho, h, w) : a;
    const float* top_a = x + a.top;
    const float* top_b = x + b.top;
    float* ya = y + ra * wo;
    float* yb = two ? ya + wo : nullptr;
    int32_t* aa = argmax ? argmax + ra * wo : nullptr;
    int32_t* ab = argmax && two ? aa + wo : nullptr;
    for (int64_t ox = 0; ox < wo; ox += 8) {
      const int64_t cols = 2 * (wo - ox);  // input columns of the valid windows
      const __mmask8 m0 = lanes(cols), m1 = lanes(cols - 8);
      V16 v00, v01, v10, v11;  // window (0,0) (0,1) (1,0) (1,1) per lane
      deinterleave(loadHalves(top_a + 2 * ox, top_b + 2 * ox, m0),
                   loadHalves(top_a + 2 * ox + 8, top_b + 2 * ox + 8, m1), v00, v01);
      deinterleave(loadHalves(top_a + w + 2 * ox, top_b + w + 2 * ox, m0),
                   loadHalves(top_a + w + 2 * ox + 8, top_b + w + 2 * ox + 8, m1), v10, v11);
      const __m512i at00 = _mm512_add_epi32(halvesEpi32(a.base + 2 * ox, b.base + 2 * ox), lane2);
      __m512 best = v00.v;
      __m512i at = at00;
      takeIfGreater(best, at, v01.v, _mm512_add_epi32(at00, one));
      const __m512i at10 = _mm512_add_epi32(at00, width);
      takeIfGreater(best, at, v10.v, at10);
      takeIfGreater(best, at, v11.v, _mm512_add_epi32(at10, one));
      const __mmask8 out = lanes(wo - ox);
      storeHalves(ya + ox, yb ? yb + ox : nullptr, V16{best}, out);
      if (aa) storeHalvesEpi32(aa + ox, ab ? ab + ox : nullptr, at, out);
    }
  }
}

void maxPool2x2Backward(const float* dy, const int32_t* argmax, int64_t planes, int64_t h, int64_t w,
                        float* dx) {
  const int64_t ho = h / 2, wo = w / 2, rows = planes * ho;
  const __m512i lane2 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14);
  const __m512i one = _mm512_set1_epi32(1), width = _mm512_set1_epi32(static_cast<int32_t>(w));
  for (int64_t ra = 0; ra < rows; ra += 2) {
    const bool two = ra + 1 < rows;
    const RowAt a = rowAt(ra, ho, h, w), b = two ? rowAt(ra + 1, ho, h, w) : a;
    float* top_a = dx + a.top;
    float* top_b = two ? dx + b.top : nullptr;
    const float* ga = dy + ra * wo;
    const float* gb = two ? ga + wo : ga;
    const int32_t* ia = argmax + ra * wo;
    const int32_t* ib = two ? ia + wo : ia;
    for (int64_t ox = 0; ox < wo; ox += 8) {
      const __mmask8 m = lanes(wo - ox);
      const __m512 g = loadHalves(ga + ox, gb + ox, m).v;
      const __m512i at = loadHalvesEpi32(ia + ox, ib + ox, m);
      const __m512i at00 = _mm512_add_epi32(halvesEpi32(a.base + 2 * ox, b.base + 2 * ox), lane2);
      const __m512i at10 = _mm512_add_epi32(at00, width);
      auto pick = [&](__m512i pos) { return V16{_mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, pos), g)}; };
      const int64_t cols = 2 * (wo - ox);
      V16 lo, hi;
      interleave(pick(at00), pick(_mm512_add_epi32(at00, one)), lo, hi);
      storeHalves(top_a + 2 * ox, top_b ? top_b + 2 * ox : nullptr, lo, lanes(cols));
      storeHalves(top_a + 2 * ox + 8, top_b ? top_b + 2 * ox + 8 : nullptr, hi, lanes(cols - 8));
      interleave(pick(at10), pick(_mm512_add_epi32(at10, one)), lo, hi);
      storeHalves(top_a + w + 2 * ox, top_b ? top_b + w + 2 * ox : nullptr, lo, lanes(cols));
      storeHalves(top_a + w + 2 * ox + 8, top_b ? top_b + w + 2 * ox + 8 : nullptr, hi, lanes(cols - 8));
    }
    if (w % 2) {  // the column no window covers
      top_a[w - 1] = top_a[2 * w - 1] = 0.0f;
      if (top_b) top_b[w - 1] = top_b[2 * w - 1] = 0.0f;
    }
  }
  if (h % 2)  // the row no window covers
    for (int64_t p = 0; p < planes; ++p) {
      float* last = dx + (p * h + h - 1) * w;
      for (int64_t i = 0; i < w; i += 16)
        _mm512_mask_storeu_ps(last + i, w - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (w - i)) - 1u),
                              _mm512_setzero_ps());
    }
}

}  // namespace dtrain::ops::avx512
