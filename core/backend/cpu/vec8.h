// A minimal 8-lane float vector for the hand-vectorised kernels (Winograd
// transforms): AVX2 when the build targets it, plain arrays otherwise, so the
// kernels are written once. Internal to core/backend/cpu.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace dtrain::ops::simd {

#if defined(__AVX2__)

struct V8 {
  __m256 v;
};

inline V8 zero() { return {_mm256_setzero_ps()}; }
inline V8 broadcast(float x) { return {_mm256_set1_ps(x)}; }
inline V8 load(const float* p) { return {_mm256_loadu_ps(p)}; }
inline void store(float* p, V8 a) { _mm256_storeu_ps(p, a.v); }
// Lanes [0, n) active; n is clamped to [0, 8]. Masked-off lanes are neither
// read nor written, so partial vectors at the end of a buffer are safe.
inline __m256i laneMask(int64_t n) {
  static constexpr int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  n = n < 0 ? 0 : (n > 8 ? 8 : n);
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - n));
}
inline V8 loadN(const float* p, int64_t n) {
  return n >= 8 ? load(p) : V8{_mm256_maskload_ps(p, laneMask(n))};
}
// Partial stores go through a scalar copy: vmaskmovps stores are microcoded
// and very slow on AMD Zen, while masked loads are cheap everywhere.
inline void storeN(float* p, V8 a, int64_t n) {
  if (n >= 8) {
    store(p, a);
    return;
  }
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, a.v);
  for (int64_t i = 0; i < n; ++i) p[i] = tmp[i];
}
// A lane mask computed once for many loads and stores.
struct Mask {
  __m256i m;
  int64_t n;
};
inline Mask firstLanes(int64_t n) { return {laneMask(n), n}; }
inline void storeMasked(float* p, V8 a, Mask m) { storeN(p, a, m.n); }
inline V8 loadMasked(const float* p, Mask m) { return {_mm256_maskload_ps(p, m.m)}; }
inline V8 operator+(V8 a, V8 b) { return {_mm256_add_ps(a.v, b.v)}; }
inline V8 operator-(V8 a, V8 b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline V8 operator*(V8 a, V8 b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline V8 operator-(V8 a) { return {_mm256_sub_ps(_mm256_setzero_ps(), a.v)}; }
// max(a, 0); NaN stays NaN (maxps returns its second operand when either is NaN).
inline V8 max0(V8 a) { return {_mm256_max_ps(_mm256_setzero_ps(), a.v)}; }
// a * b + c with one rounding (std::fma's bits).
inline V8 fmadd(V8 a, V8 b, V8 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
// limit < a ? limit : a (minps; a NaN stays NaN).
inline V8 atMost(V8 a, V8 limit) { return {_mm256_min_ps(limit.v, a.v)}; }
// b where a < limit, else 0.
inline V8 whereBelow(V8 a, V8 limit, V8 b) {
  return {_mm256_and_ps(_mm256_cmp_ps(a.v, limit.v, _CMP_LT_OQ), b.v)};
}
// b where mask > 0, else 0 (the relu backward mask).
inline V8 wherePositive(V8 mask, V8 b) {
  return {_mm256_and_ps(_mm256_cmp_ps(mask.v, _mm256_setzero_ps(), _CMP_GT_OQ), b.v)};
}
// Lane j takes x[j + 1]; lane 7 takes next[0] (x shifted down by one lane).
inline V8 shiftDown(V8 x, V8 next) {
  const __m256 y = _mm256_permute2f128_ps(x.v, next.v, 0x21);  // (x high, next low)
  return {_mm256_castsi256_ps(_mm256_alignr_epi8(_mm256_castps_si256(y), _mm256_castps_si256(x.v), 4))};
}
// Lane j takes x[j - 1]; lane 0 takes prev[7] (x shifted up by one lane).
inline V8 shiftUp(V8 x, V8 prev) {
  const __m256 w = _mm256_permute2f128_ps(prev.v, x.v, 0x21);  // (prev high, x low)
  return {_mm256_castsi256_ps(_mm256_alignr_epi8(_mm256_castps_si256(x.v), _mm256_castps_si256(w), 12))};
}
// (a0 b0 a1 b1 a2 b2 a3 b3), (a4 b4 ... a7 b7).
inline void interleave(V8 a, V8 b, V8& lo, V8& hi) {
  __m256 l = _mm256_unpacklo_ps(a.v, b.v), h = _mm256_unpackhi_ps(a.v, b.v);
  lo.v = _mm256_permute2f128_ps(l, h, 0x20);
  hi.v = _mm256_permute2f128_ps(l, h, 0x31);
}
// The inverse: lanes of (lo, hi) at even positions -> even, odd -> odd.
inline void deinterleave(V8 lo, V8 hi, V8& even, V8& odd) {
  __m256 e = _mm256_shuffle_ps(lo.v, hi.v, 0x88), o = _mm256_shuffle_ps(lo.v, hi.v, 0xDD);
  even.v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
  odd.v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8));
}

#else

struct V8 {
  float v[8];
};

inline V8 zero() { return V8{}; }
inline V8 broadcast(float x) {
  V8 r;
  for (int i = 0; i < 8; ++i) r.v[i] = x;
  return r;
}
inline V8 loadN(const float* p, int64_t n) {
  V8 r{};
  for (int64_t i = 0; i < 8 && i < n; ++i) r.v[i] = p[i];
  return r;
}
inline V8 load(const float* p) { return loadN(p, 8); }
inline void storeN(float* p, V8 a, int64_t n) {
  for (int64_t i = 0; i < 8 && i < n; ++i) p[i] = a.v[i];
}
inline void store(float* p, V8 a) { storeN(p, a, 8); }
struct Mask {
  int64_t n;
};
inline Mask firstLanes(int64_t n) { return {n}; }
inline void storeMasked(float* p, V8 a, Mask m) { storeN(p, a, m.n); }
inline V8 loadMasked(const float* p, Mask m) { return loadN(p, m.n); }
#define DTRAIN_V8_BINARY(op)                               \
  inline V8 operator op(V8 a, V8 b) {                      \
    V8 r;                                                  \
    for (int i = 0; i < 8; ++i) r.v[i] = a.v[i] op b.v[i]; \
    return r;                                              \
  }
DTRAIN_V8_BINARY(+)
DTRAIN_V8_BINARY(-)
DTRAIN_V8_BINARY(*)
#undef DTRAIN_V8_BINARY
inline V8 operator-(V8 a) { return zero() - a; }
inline V8 max0(V8 a) {
  for (int i = 0; i < 8; ++i) a.v[i] = a.v[i] < 0.0f ? 0.0f : a.v[i];
  return a;
}
inline V8 wherePositive(V8 mask, V8 b) {
  for (int i = 0; i < 8; ++i) b.v[i] = mask.v[i] > 0.0f ? b.v[i] : 0.0f;
  return b;
}
inline V8 fmadd(V8 a, V8 b, V8 c) {
  for (int i = 0; i < 8; ++i) a.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
  return a;
}
inline V8 atMost(V8 a, V8 limit) {
  for (int i = 0; i < 8; ++i) a.v[i] = limit.v[i] < a.v[i] ? limit.v[i] : a.v[i];
  return a;
}
inline V8 whereBelow(V8 a, V8 limit, V8 b) {
  for (int i = 0; i < 8; ++i) b.v[i] = a.v[i] < limit.v[i] ? b.v[i] : 0.0f;
  return b;
}
inline V8 shiftDown(V8 x, V8 next) {
  V8 r;
  for (int i = 0; i < 7; ++i) r.v[i] = x.v[i + 1];
  r.v[7] = next.v[0];
  return r;
}
inline V8 shiftUp(V8 x, V8 prev) {
  V8 r;
  r.v[0] = prev.v[7];
  for (int i = 1; i < 8; ++i) r.v[i] = x.v[i - 1];
  return r;
}
inline void interleave(V8 a, V8 b, V8& lo, V8& hi) {
  for (int i = 0; i < 4; ++i) {
    lo.v[2 * i] = a.v[i];
    lo.v[2 * i + 1] = b.v[i];
    hi.v[2 * i] = a.v[i + 4];
    hi.v[2 * i + 1] = b.v[i + 4];
  }
}
inline void deinterleave(V8 lo, V8 hi, V8& even, V8& odd) {
  for (int i = 0; i < 4; ++i) {
    even.v[i] = lo.v[2 * i];
    odd.v[i] = lo.v[2 * i + 1];
    even.v[i + 4] = hi.v[2 * i];
    odd.v[i + 4] = hi.v[2 * i + 1];
  }
}

#endif

}  // namespace dtrain::ops::simd
