// Two planes a vector: the 512-bit type the Winograd kernels at the AVX-512
// levels (winograd*_avx512.cpp) compute with. Lanes 0-7 hold one (sample,
// channel) plane and lanes 8-15 the next, at the same positions, so the
// 8-lane kernels' plans (vec8.h) carry over step for step, each shuffle
// applied to both halves. For AVX-512 files only.
// Internal to core/backend/cpu.
#pragma once
#include <cstdint>

#include "core/backend/cpu/avx512_intrinsics.h"

namespace dtrain::ops::avx512::pairs {

// Two planes' 8 lanes each.
struct V16 {
  __m512 v;
};
inline V16 operator+(V16 a, V16 b) { return {_mm512_add_ps(a.v, b.v)}; }
inline V16 operator-(V16 a, V16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline V16 operator*(V16 a, V16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline V16 operator-(V16 a) { return {_mm512_sub_ps(_mm512_setzero_ps(), a.v)}; }
inline V16 times(float s, V16 a) { return {_mm512_mul_ps(_mm512_set1_ps(s), a.v)}; }
inline V16 zero() { return {_mm512_setzero_ps()}; }
// a in every lane of the first half, b in every lane of the second.
inline V16 halves(float a, float b) { return {_mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1)}; }
inline V16 max0(V16 a) { return {_mm512_max_ps(_mm512_setzero_ps(), a.v)}; }
// b where mask > 0, else 0 (the relu backward mask).
inline V16 wherePositive(V16 mask, V16 b) {
  return {_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(mask.v, _mm512_setzero_ps(), _CMP_GT_OQ), b.v)};
}

// vec8.h's shuffles, applied to each half: vpermt2ps picks any lane of two
// vectors (indices 16 and up name the second).
inline V16 pick(V16 a, V16 b, __m512i index) { return {_mm512_permutex2var_ps(a.v, index, b.v)}; }
// Lane j takes x[j + 1]; lane 7 takes next[0].
inline V16 shiftDown(V16 x, V16 next) {
  return pick(x, next, _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 16, 9, 10, 11, 12, 13, 14, 15, 24));
}
// Lane j takes x[j - 1]; lane 0 takes prev[7].
inline V16 shiftUp(V16 x, V16 prev) {
  return pick(x, prev, _mm512_setr_epi32(23, 0, 1, 2, 3, 4, 5, 6, 31, 8, 9, 10, 11, 12, 13, 14));
}
// (a0 b0 a1 b1 a2 b2 a3 b3), (a4 b4 ... a7 b7).
inline void interleave(V16 a, V16 b, V16& lo, V16& hi) {
  lo = pick(a, b, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 8, 24, 9, 25, 10, 26, 11, 27));
  hi = pick(a, b, _mm512_setr_epi32(4, 20, 5, 21, 6, 22, 7, 23, 12, 28, 13, 29, 14, 30, 15, 31));
}
// The inverse: lanes of (lo, hi) at even positions -> even, odd -> odd.
inline void deinterleave(V16 lo, V16 hi, V16& even, V16& odd) {
  even = pick(lo, hi, _mm512_setr_epi32(0, 2, 4, 6, 16, 18, 20, 22, 8, 10, 12, 14, 24, 26, 28, 30));
  odd = pick(lo, hi, _mm512_setr_epi32(1, 3, 5, 7, 17, 19, 21, 23, 9, 11, 13, 15, 25, 27, 29, 31));
}

// Lanes [0, n) of a half, n clamped to [0, 8].
inline __mmask8 lanes(int64_t n) {
  return n >= 8 ? __mmask8(0xff) : n <= 0 ? __mmask8(0) : __mmask8((1u << n) - 1u);
}

// Half a from plane a's p, half b from plane b's; masked-off lanes read as zero
// and are not touched, so partial vectors at a buffer's end are safe.
inline V16 loadHalves(const float* a, const float* b, __mmask8 m) {
  return {_mm512_insertf32x8(_mm512_castps256_ps512(_mm256_maskz_loadu_ps(m, a)), _mm256_maskz_loadu_ps(m, b),
                             1)};
}
// b null: the second plane does not exist (an odd plane count's last vector).
inline void storeHalves(float* a, float* b, V16 v, __mmask8 m) {
  _mm256_mask_storeu_ps(a, m, _mm512_castps512_ps256(v.v));
  if (b) _mm256_mask_storeu_ps(b, m, _mm512_extractf32x8_ps(v.v, 1));
}
inline V16 load(const float* p) { return {_mm512_load_ps(p)}; }
inline void store(float* p, V16 v) { _mm512_store_ps(p, v.v); }

inline void zeroFloats(float* p, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) store(p + i, zero());
}
// Zeroes the first `count` floats of `parts` runs `stride` floats apart: the
// entries of split rows that any kernel of the call reads or adds to (the
// rest of each row's buffer is never touched, so it is not cleared).
inline void zeroParts(float* p, int64_t parts, int64_t stride, int64_t count) {
  for (int64_t i = 0; i < parts; ++i) zeroFloats(p + i * stride, count);
}

// Plane P of a call's [samples][cols] planes (sample P / cols, channel or
// filter P % cols) has its transformed row at base + (P % cols) * ld + (P / cols) * t.
inline const float* rowOf(const float* base, int64_t plane, int64_t cols, int64_t ld, int64_t t) {
  return base + (plane % cols) * ld + (plane / cols) * t;
}
inline float* rowOf(float* base, int64_t plane, int64_t cols, int64_t ld, int64_t t) {
  return base + (plane % cols) * ld + (plane / cols) * t;
}

}  // namespace dtrain::ops::avx512::pairs
