// gemmUnpacked: c = op(a) * b for a small op(a) (kept in L1) and a short inner
// dimension, as in the Winograd products (k = channels or filters) and the
// first layer's im2col (k = kh * kw). OpenBLAS packs both operands on every
// call, which at these shapes costs as much as the multiply; this kernel
// streams b's rows directly and broadcasts a's elements, 6 rows x 16 columns
// of c per register block (12 accumulators, FMA-bound on AVX2). A per-row bias
// and a relu are applied in registers before the store, saving a pass over c.
#include <limits>

#include "core/backend/cpu/cpu_kernels_avx512.h"
#include "core/backend/cpu/gemm_levels.h"
#include "core/backend/ops.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "core/backend/cpu/vec8.h"
#endif

namespace dtrain::ops {

#if defined(__AVX2__) && defined(__FMA__)

namespace {

// c[MR x 16] = sum_k a(i, k) b[k, 0..16), a(i, k) at a[i * ars + k * acs].
// Masked: only the first `valid` columns of b are read (the rest count as 0).
// k >= 1. GCC keeps the accumulator arrays in registers only when each
// instantiation has a single loop nest, hence the template flag rather than a
// branch inside.
struct Epilogue {
  const float* bias;  // per row of c, or null
  bool relu;
};

template <int MR, bool kMasked>
inline __attribute__((always_inline)) void block(int64_t k, const float* a, int64_t ars, int64_t acs,
                                                 const float* b, int64_t ldb, float* c, int64_t ldc,
                                                 int64_t valid, Epilogue ep) {
  const __m256i m0 = simd::laneMask(valid), m1 = simd::laneMask(valid - 8);
  auto load_b = [&](int64_t p, __m256& b0, __m256& b1) {
    const float* bp = b + p * ldb;
    b0 = kMasked ? _mm256_maskload_ps(bp, m0) : _mm256_loadu_ps(bp);
    b1 = kMasked ? _mm256_maskload_ps(bp + 8, m1) : _mm256_loadu_ps(bp + 8);
  };
  // The first step multiplies instead of zeroing the accumulators first: GCC
  // turns a zeroing loop into memset calls on a stack copy of the arrays.
  __m256 acc0[MR], acc1[MR], b0, b1;
  load_b(0, b0, b1);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m256 av = _mm256_broadcast_ss(a + i * ars);
    acc0[i] = _mm256_mul_ps(av, b0);
    acc1[i] = _mm256_mul_ps(av, b1);
  }
  for (int64_t p = 1; p < k; ++p) {
    load_b(p, b0, b1);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * ars + p * acs);
      acc0[i] = _mm256_fmadd_ps(av, b0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(av, b1, acc1[i]);
    }
  }
  // Branch-free epilogue (a zero bias, a -inf floor without relu): with
  // conditional updates GCC stops keeping the accumulators in registers.
  // max(floor, x) returns x when x is NaN, so NaN propagates.
  const __m256 floor = _mm256_set1_ps(ep.relu ? 0.0f : -std::numeric_limits<float>::infinity());
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m256 bv = _mm256_set1_ps(ep.bias ? ep.bias[i] : 0.0f);
    acc0[i] = _mm256_max_ps(floor, _mm256_add_ps(acc0[i], bv));
    acc1[i] = _mm256_max_ps(floor, _mm256_add_ps(acc1[i], bv));
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc0[i]);
    _mm256_storeu_ps(c + i * ldc + 8, acc1[i]);
  }
}

// One 16-column slice of c for MR rows; `valid` < 16 marks the last, partial
// slice, computed into a local block and copied out so that nothing past
// column n is written (masked stores are slow on some CPUs). The two cases
// are separate functions: inlined into one, GCC gives up keeping the
// accumulators in registers.
template <int MR>
__attribute__((noinline)) void fullBlock(int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
                                         int64_t ldb, float* c, int64_t ldc, Epilogue ep) {
  block<MR, false>(k, a, ars, acs, b, ldb, c, ldc, 16, ep);
}

template <int MR>
__attribute__((noinline)) void tailBlock(int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
                                         int64_t ldb, float* c, int64_t ldc, int64_t valid, Epilogue ep) {
  alignas(32) float tmp[MR * 16];
  block<MR, true>(k, a, ars, acs, b, ldb, tmp, 16, valid, ep);
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < valid; ++j) c[i * ldc + j] = tmp[i * 16 + j];
}

template <int MR>
inline void rowBlock(int64_t k, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb,
                     float* c, int64_t ldc, int64_t valid, Epilogue ep) {
  if (valid >= 16)
    fullBlock<MR>(k, a, ars, acs, b, ldb, c, ldc, ep);
  else
    tailBlock<MR>(k, a, ars, acs, b, ldb, c, ldc, valid, ep);
}

void slice(int64_t m, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb,
           float* c, int64_t ldc, int64_t valid, Epilogue ep) {
  int64_t i = 0;
  for (; i + 6 <= m; i += 6) {
    rowBlock<6>(k, a + i * ars, ars, acs, b, ldb, c + i * ldc, ldc, valid, ep);
    if (ep.bias) ep.bias += 6;
  }
  const float* ai = a + i * ars;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 5:
      rowBlock<5>(k, ai, ars, acs, b, ldb, ci, ldc, valid, ep);
      break;
    case 4:
      rowBlock<4>(k, ai, ars, acs, b, ldb, ci, ldc, valid, ep);
      break;
    case 3:
      rowBlock<3>(k, ai, ars, acs, b, ldb, ci, ldc, valid, ep);
      break;
    case 2:
      rowBlock<2>(k, ai, ars, acs, b, ldb, ci, ldc, valid, ep);
      break;
    case 1:
      rowBlock<1>(k, ai, ars, acs, b, ldb, ci, ldc, valid, ep);
      break;
    default:
      break;
  }
}

}  // namespace

static void gemmUnpackedAvx2(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                             const float* b, int64_t ldb, float* c, int64_t ldc, const float* row_bias, bool relu) {
  const int64_t ars = trans_a ? 1 : lda, acs = trans_a ? lda : 1;
  // Column slices outside, row blocks inside: the k x 16 slice of b stays in
  // L1 while every row block of a (all of a is in L1 too) passes over it.
  for (int64_t j = 0; j < n; j += 16)
    slice(m, k, a, ars, acs, b + j, ldb, c + j, ldc, n - j, Epilogue{row_bias, relu});
}

#else

static void gemmUnpackedAvx2(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                             const float* b, int64_t ldb, float* c, int64_t ldc, const float* row_bias, bool relu) {
  gemm(trans_a, false, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  if (row_bias || relu)
    for (int64_t i = 0; i < m; ++i) biasActPlanes(c + i * ldc, row_bias ? row_bias + i : nullptr, 1, n, relu);
}

#endif

void gemmUnpackedAtLevel(cpu::Level level, bool trans_a, int64_t m, int64_t n, int64_t k, const float* a,
                         int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, const float* row_bias,
                         bool relu) {
  if (k == 0) {  // an empty product: c = act(bias)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float v = row_bias ? row_bias[i] : 0.0f;
        c[i * ldc + j] = relu && v < 0.0f ? 0.0f : v;
      }
    return;
  }
  if (level == cpu::Level::Avx2)
    gemmUnpackedAvx2(trans_a, m, n, k, a, lda, b, ldb, c, ldc, row_bias, relu);
  else
    avx512::gemmUnpacked(trans_a, m, n, k, a, lda, b, ldb, c, ldc, row_bias, relu);
}

void gemmUnpacked(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* c, int64_t ldc, const float* row_bias, bool relu) {
  static const cpu::Level level = cpu::activeLevel();
  gemmUnpackedAtLevel(level, trans_a, m, n, k, a, lda, b, ldb, c, ldc, row_bias, relu);
}

}  // namespace dtrain::ops
