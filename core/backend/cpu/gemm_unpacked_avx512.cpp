// gemmUnpacked at 512 bits: the AVX2 kernel's plan (b's rows streamed, a's
// elements broadcast, bias and relu in registers) with 12 rows x 32 columns
// of c per block: 24 of the 32 zmm registers accumulate, so each loaded b
// vector feeds 12 FMAs. Partial column slices use masked loads and stores.
#include "core/backend/cpu/avx512_intrinsics.h"
#include "core/backend/cpu/cpu_kernels_avx512.h"

namespace dtrain::ops::avx512 {

namespace {

struct Epilogue {
  const float* bias;  // per row of c, or null
  bool relu;
};

template <int MR>
__attribute__((noinline)) void block(int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
                                     int64_t ldb, float* c, int64_t ldc, int64_t valid, Epilogue ep) {
  const __mmask16 m0 = valid >= 16 ? __mmask16(0xffff) : __mmask16((1u << valid) - 1u);
  const int64_t rest = valid - 16;
  const __mmask16 m1 = rest >= 16  ? __mmask16(0xffff)
                       : rest <= 0 ? __mmask16(0)
                                   : __mmask16((1u << rest) - 1u);
  __m512 acc0[MR], acc1[MR];
  __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + 16);
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    const __m512 av = _mm512_set1_ps(a[i * ars]);
    acc0[i] = _mm512_mul_ps(av, b0);
    acc1[i] = _mm512_mul_ps(av, b1);
  }
  for (int64_t p = 1; p < k; ++p) {
    const float* bp = b + p * ldb;
    b0 = _mm512_maskz_loadu_ps(m0, bp);
    b1 = _mm512_maskz_loadu_ps(m1, bp + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(a[i * ars + p * acs]);
      acc0[i] = _mm512_fmadd_ps(av, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(av, b1, acc1[i]);
    }
  }
  // max(floor, x) returns x when x is NaN, so NaN propagates (as the AVX2 kernel).
  const __m512 floor = _mm512_set1_ps(ep.relu ? 0.0f : -__builtin_inff());
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    const __m512 bv = _mm512_set1_ps(ep.bias ? ep.bias[i] : 0.0f);
    _mm512_mask_storeu_ps(c + i * ldc, m0, _mm512_max_ps(floor, _mm512_add_ps(acc0[i], bv)));
    _mm512_mask_storeu_ps(c + i * ldc + 16, m1, _mm512_max_ps(floor, _mm512_add_ps(acc1[i], bv)));
  }
}

template <int MR>
void rows(int64_t m, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb,
          float* c, int64_t ldc, int64_t valid, Epilogue ep) {
  if constexpr (MR > 0) {
    if (m >= MR) {
      int64_t i = 0;
      for (; i + MR <= m; i += MR) {
        block<MR>(k, a + i * ars, ars, acs, b, ldb, c + i * ldc, ldc, valid, ep);
        if (ep.bias) ep.bias += MR;
      }
      if (i < m) rows<MR - 1>(m - i, k, a + i * ars, ars, acs, b, ldb, c + i * ldc, ldc, valid, ep);
    } else {
      rows<MR - 1>(m, k, a, ars, acs, b, ldb, c, ldc, valid, ep);
    }
  }
}

}  // namespace

void gemmUnpacked(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* c, int64_t ldc, const float* row_bias, bool relu) {
  const int64_t ars = trans_a ? 1 : lda, acs = trans_a ? lda : 1;
  // Column slices outside, row blocks inside: the k x 32 slice of b stays in
  // L1 while every row block of a (all of a is in L1 too) passes over it.
  for (int64_t j = 0; j < n; j += 32)
    rows<12>(m, k, a, ars, acs, b + j, ldb, c + j, ldc, n - j, Epilogue{row_bias, relu});
}

}  // namespace dtrain::ops::avx512
