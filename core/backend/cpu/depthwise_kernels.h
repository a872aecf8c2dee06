// Shared by the depthwise convolution kernels (depthwise_conv.cpp and the
// vectorised 3x3 paths depthwise_3x3_stride1.cpp, depthwise_3x3_stride2.cpp):
// the vector arithmetic they need beyond vec8.h, and the paths' entry points.
// Internal to core/backend/cpu.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/backend/cpu/vec8.h"
#include "core/backend/ops.h"

namespace dtrain::ops::depthwise {

using simd::V8;

// Scratch regions start on 32-byte boundaries (whole vectors).
inline int64_t roundUp8(int64_t v) { return (v + 7) / 8 * 8; }

// A lane-select mask stored as a float: all bits set (keep) or zero (drop).
inline float laneMask(bool keep) {
  const uint32_t bits = keep ? 0xFFFFFFFFu : 0u;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

#if defined(__AVX2__)

inline V8 mul(V8 a, V8 b) { return {_mm256_mul_ps(a.v, b.v)}; }
// a * b + c (fused where the target has FMA).
inline V8 mulAdd(V8 a, V8 b, V8 c) {
#if defined(__FMA__)
  return {_mm256_fmadd_ps(a.v, b.v, c.v)};
#else
  return {_mm256_add_ps(_mm256_mul_ps(a.v, b.v), c.v)};
#endif
}
// a where `mask` (lanes from laneMask) keeps, else 0.
inline V8 select(V8 a, V8 mask) { return {_mm256_and_ps(a.v, mask.v)}; }
inline float sum(V8 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// dst[0, 8) += the horizontal sums of a[0..8): a transposing reduction tree,
// cheaper than eight single reductions.
inline void addSums8(const V8 a[8], float* dst) {
  const __m256 h01 = _mm256_hadd_ps(a[0].v, a[1].v), h23 = _mm256_hadd_ps(a[2].v, a[3].v);
  const __m256 h45 = _mm256_hadd_ps(a[4].v, a[5].v), h67 = _mm256_hadd_ps(a[6].v, a[7].v);
  // Per 128-bit half: the half-sums of a0..a3 (q0) and a4..a7 (q1).
  const __m256 q0 = _mm256_hadd_ps(h01, h23), q1 = _mm256_hadd_ps(h45, h67);
  const __m256 lo = _mm256_permute2f128_ps(q0, q1, 0x20), hi = _mm256_permute2f128_ps(q0, q1, 0x31);
  _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_loadu_ps(dst), _mm256_add_ps(lo, hi)));
}

// Stride 2 splits 16 consecutive floats (a, b) into even and odd elements.
// Within a 128-bit half that is one shuffle; the lanes then come out in
// "pair order" (natural elements 0 1 4 5 2 3 6 7), and the kernels keep that
// order through every product and fix it once per output vector, instead of
// paying a lane-crossing permute per split.
inline V8 evens(V8 a, V8 b) { return {_mm256_shuffle_ps(a.v, b.v, 0x88)}; }
inline V8 odds(V8 a, V8 b) { return {_mm256_shuffle_ps(a.v, b.v, 0xDD)}; }
// Natural order <-> pair order (the permutation is its own inverse).
inline V8 swapPairOrder(V8 a) {
  return {_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(a.v), 0xD8))};
}

#else

inline V8 mul(V8 a, V8 b) {
  for (int i = 0; i < 8; ++i) a.v[i] *= b.v[i];
  return a;
}
inline V8 mulAdd(V8 a, V8 b, V8 c) {
  for (int i = 0; i < 8; ++i) c.v[i] += a.v[i] * b.v[i];
  return c;
}
inline V8 select(V8 a, V8 mask) {
  for (int i = 0; i < 8; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &mask.v[i], sizeof bits);
    if (!bits) a.v[i] = 0.0f;
  }
  return a;
}
inline float sum(V8 a) {
  return ((a.v[0] + a.v[1]) + (a.v[2] + a.v[3])) + ((a.v[4] + a.v[5]) + (a.v[6] + a.v[7]));
}
inline void addSums8(const V8 a[8], float* dst) {
  for (int i = 0; i < 8; ++i) dst[i] += sum(a[i]);
}
// Without AVX2 the split is in natural order and the fix-up is the identity.
inline V8 evens(V8 a, V8 b) {
  V8 r;
  for (int i = 0; i < 4; ++i) {
    r.v[i] = a.v[2 * i];
    r.v[i + 4] = b.v[2 * i];
  }
  return r;
}
inline V8 odds(V8 a, V8 b) {
  V8 r;
  for (int i = 0; i < 4; ++i) {
    r.v[i] = a.v[2 * i + 1];
    r.v[i + 4] = b.v[2 * i + 1];
  }
  return r;
}
inline V8 swapPairOrder(V8 a) { return a; }

#endif

// The 3x3 taps of one filter, broadcast once per plane.
struct Taps {
  V8 k[9];
  explicit Taps(const float* w) {
    for (int t = 0; t < 9; ++t) k[t] = simd::broadcast(w[t]);
  }
};

// Entry points of the vectorised paths (preconditions: 3x3, padding 1, the
// stride named), with the meaning of ops::depthwiseForward / depthwiseBackward.
int64_t stride1ScratchFloats(const Window2d& g);
void forwardStride1(const float* x, int64_t n, const Window2d& g, int64_t m, const float* w,
                    const float* bias, bool relu, float* y, float* scratch);
void backwardStride1(const float* x, const float* relu_out, const float* dy, int64_t n, const Window2d& g,
                     int64_t m, const float* w, float* dw, float* dbias, float* dx, float* scratch);
int64_t stride2ScratchFloats(const Window2d& g);
void forwardStride2(const float* x, int64_t n, const Window2d& g, int64_t m, const float* w,
                    const float* bias, bool relu, float* y, float* scratch);
void backwardStride2(const float* x, const float* relu_out, const float* dy, int64_t n, const Window2d& g,
                     int64_t m, const float* w, float* dw, float* dbias, float* dx, float* scratch);

// dst[0, n) = src, masked by relu_out > 0 when relu_out is given (a fused
// relu's backward), and dst[n, roundUp8(n)) = 0: whole vectors, so a short
// row costs one masked load and one store, not a call to memcpy.
inline void copyPadded(const float* src, const float* relu_out, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    V8 v = simd::load(src + i);
    if (relu_out) v = simd::wherePositive(simd::load(relu_out + i), v);
    simd::store(dst + i, v);
  }
  if (i == n) return;
  V8 v = simd::loadN(src + i, n - i);
  if (relu_out) v = simd::wherePositive(simd::loadN(relu_out + i, n - i), v);
  simd::store(dst + i, v);
}

}  // namespace dtrain::ops::depthwise
