#include "core/backend/cpu/pool_2x2.h"

#include <cstring>

#include "core/backend/cpu/cpu_kernels_avx512.h"
#include "core/backend/cpu/vec8.h"

namespace dtrain::ops::detail {

#if defined(__AVX2__)

namespace {

using simd::V8;

// As in winograd.cpp: whole-vector stores whose surplus lanes spill forward
// into memory the same call writes later; partial only where a store would
// cross `end`.
inline void storeSpill(float* p, V8 v, int64_t valid, const float* end) {
  if (end - p < 8)
    simd::storeN(p, v, valid);
  else
    simd::store(p, v);
}
inline void storeSpill(int32_t* p, __m256i v, int64_t valid, const int32_t* end) {
  if (end - p < 8) {  // a scalar copy: masked stores are slow on AMD Zen
    alignas(32) int32_t tmp[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), v);
    for (int64_t i = 0; i < valid; ++i) p[i] = tmp[i];
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
}

// Replaces (best, at) by (v, v_at) where v > best or v is NaN: the scan
// order keeps the first maximum on ties and lets NaN propagate.
inline void takeIfGreater(__m256& best, __m256i& at, __m256 v, __m256i v_at) {
  const __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  best = _mm256_blendv_ps(best, v, take);
  at = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(at), _mm256_castsi256_ps(v_at), take));
}

bool maxPool2x2Forward256(const float* x, int64_t planes, int64_t h, int64_t w, float* y, int32_t* argmax) {
  const int64_t ho = h / 2, wo = w / 2;
  const float* y_end = y + planes * ho * wo;
  const int32_t* a_end = argmax ? argmax + planes * ho * wo : nullptr;
  const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  const __m256i one = _mm256_set1_epi32(1), width = _mm256_set1_epi32(static_cast<int32_t>(w));
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * h * w;
    for (int64_t oy = 0; oy < ho; ++oy) {
      const float* r0 = xp + 2 * oy * w;
      const float* r1 = r0 + w;
      float* yr = y + (p * ho + oy) * wo;
      int32_t* ar = argmax ? argmax + (p * ho + oy) * wo : nullptr;
      for (int64_t ox = 0; ox < wo; ox += 8) {
        const int64_t left = wo - ox, cols = 2 * left;  // input columns of the valid windows
        V8 a, b, c, d;                                  // window (0,0) (0,1) (1,0) (1,1) per lane
        simd::deinterleave(simd::loadN(r0 + 2 * ox, cols), simd::loadN(r0 + 2 * ox + 8, cols - 8), a, b);
        simd::deinterleave(simd::loadN(r1 + 2 * ox, cols), simd::loadN(r1 + 2 * ox + 8, cols - 8), c, d);
        const __m256i at_a =
            _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(2 * oy * w + 2 * ox)), lane2);
        __m256 best = a.v;
        __m256i at = at_a;
        takeIfGreater(best, at, b.v, _mm256_add_epi32(at_a, one));
        const __m256i at_c = _mm256_add_epi32(at_a, width);
        takeIfGreater(best, at, c.v, at_c);
        takeIfGreater(best, at, d.v, _mm256_add_epi32(at_c, one));
        storeSpill(yr + ox, V8{best}, left, y_end);
        if (ar) storeSpill(ar + ox, at, left, a_end);
      }
    }
  }
  return true;
}

bool maxPool2x2Backward256(const float* dy, const int32_t* argmax, int64_t planes, int64_t h, int64_t w,
                           float* dx) {
  const int64_t ho = h / 2, wo = w / 2;
  const float* dx_end = dx + planes * h * w;
  const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  const __m256i one = _mm256_set1_epi32(1), width = _mm256_set1_epi32(static_cast<int32_t>(w));
  for (int64_t p = 0; p < planes; ++p) {
    float* dxp = dx + p * h * w;
    for (int64_t oy = 0; oy < ho; ++oy) {
      const float* gr = dy + (p * ho + oy) * wo;
      const int32_t* ar = argmax + (p * ho + oy) * wo;
      float* row0 = dxp + 2 * oy * w;
      // Right to left: each chunk writes two rows, so the partial chunk goes
      // first and its spill into the next row is overwritten afterwards.
      for (int64_t ox = (wo - 1) / 8 * 8; ox >= 0; ox -= 8) {
        const int64_t left = wo - ox;
        const __m256 g = simd::loadN(gr + ox, left).v;
        const __m256i at = _mm256_maskload_epi32(ar + ox, simd::laneMask(left));
        const __m256i at_a =
            _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(2 * oy * w + 2 * ox)), lane2);
        const __m256i at_c = _mm256_add_epi32(at_a, width);
        auto pick = [&](__m256i pos) {
          return V8{_mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(at, pos)), g)};
        };
        V8 lo, hi;
        simd::interleave(pick(at_a), pick(_mm256_add_epi32(at_a, one)), lo, hi);
        storeSpill(row0 + 2 * ox, lo, 2 * left, dx_end);
        if (2 * left > 8) storeSpill(row0 + 2 * ox + 8, hi, 2 * left - 8, dx_end);
        simd::interleave(pick(at_c), pick(_mm256_add_epi32(at_c, one)), lo, hi);
        storeSpill(row0 + w + 2 * ox, lo, 2 * left, dx_end);
        if (2 * left > 8) storeSpill(row0 + w + 2 * ox + 8, hi, 2 * left - 8, dx_end);
      }
      if (w % 2) row0[w - 1] = row0[2 * w - 1] = 0.0f;  // the column no window covers
    }
    if (h % 2) std::memset(dxp + (h - 1) * w, 0, sizeof(float) * w);  // the row no window covers
  }
  return true;
}

}  // namespace

#else

namespace {

bool maxPool2x2Forward256(const float*, int64_t, int64_t, int64_t, float*, int32_t*) { return false; }
bool maxPool2x2Backward256(const float*, const int32_t*, int64_t, int64_t, int64_t, float*) { return false; }

}  // namespace

#endif

bool maxPool2x2ForwardAtLevel(cpu::Level level, const float* x, int64_t planes, int64_t h, int64_t w,
                              float* y, int32_t* argmax) {
  if (level < cpu::Level::Avx512) return maxPool2x2Forward256(x, planes, h, w, y, argmax);
  avx512::maxPool2x2Forward(x, planes, h, w, y, argmax);
  return true;
}

bool maxPool2x2BackwardAtLevel(cpu::Level level, const float* dy, const int32_t* argmax, int64_t planes,
                               int64_t h, int64_t w, float* dx) {
  if (level < cpu::Level::Avx512) return maxPool2x2Backward256(dy, argmax, planes, h, w, dx);
  avx512::maxPool2x2Backward(dy, argmax, planes, h, w, dx);
  return true;
}

bool maxPool2x2Forward(const float* x, int64_t planes, int64_t h, int64_t w, float* y, int32_t* argmax) {
  static const cpu::Level level = cpu::activeLevel();
  return maxPool2x2ForwardAtLevel(level, x, planes, h, w, y, argmax);
}

bool maxPool2x2Backward(const float* dy, const int32_t* argmax, int64_t planes, int64_t h, int64_t w,
                        float* dx) {
  static const cpu::Level level = cpu::activeLevel();
  return maxPool2x2BackwardAtLevel(level, dy, argmax, planes, h, w, dx);
}

}  // namespace dtrain::ops::detail
