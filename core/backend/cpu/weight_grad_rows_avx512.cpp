// weightGradRows at 512 bits: weight_grad_rows.cpp's plan (one row of g held
// against up to 10 rows of col, the fused relu's mask and the bias sums
// applied on the fly) with 16 lanes a step and masked tails.
#include "core/backend/cpu/avx512_intrinsics.h"
#include "core/backend/cpu/cpu_kernels_avx512.h"

namespace dtrain::ops::avx512 {

namespace {

// One vector step over lanes m of the plane at t.
template <int CR, bool kBias>
inline __attribute__((always_inline)) void step(const float* g, const float* relu_out, int64_t p,
                                                const float* col, int64_t t, __mmask16 m, __m512 (&acc)[CR],
                                                __m512& bacc) {
  __m512 gv = _mm512_maskz_loadu_ps(m, g + t);
  if (relu_out)
    gv = _mm512_maskz_mov_ps(
        _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, relu_out + t), _mm512_setzero_ps(), _CMP_GT_OQ), gv);
  if (kBias) bacc = _mm512_add_ps(bacc, gv);
#pragma GCC unroll 10
  for (int j = 0; j < CR; ++j)
    acc[j] = _mm512_fmadd_ps(gv, _mm512_maskz_loadu_ps(m, col + j * p + t), acc[j]);
}

// One row of g against col's rows [0, CR); with kBias also its sum.
template <int CR, bool kBias>
void block(const float* g, const float* relu_out, int64_t p, const float* col, float* dw, float* dbias) {
  __m512 acc[CR], bacc = _mm512_setzero_ps();
  for (int j = 0; j < CR; ++j) acc[j] = _mm512_setzero_ps();
  int64_t t = 0;
  for (; t + 16 <= p; t += 16) step<CR, kBias>(g, relu_out, p, col, t, __mmask16(0xffff), acc, bacc);
  if (t < p) step<CR, kBias>(g, relu_out, p, col, t, __mmask16((1u << (p - t)) - 1u), acc, bacc);
  for (int j = 0; j < CR; ++j) dw[j] += _mm512_reduce_add_ps(acc[j]);
  if (kBias) *dbias += _mm512_reduce_add_ps(bacc);
}

template <int CR>
void rowPart(const float* g, const float* relu_out, int64_t p, const float* col, float* dw, float* dbias) {
  if (dbias)
    block<CR, true>(g, relu_out, p, col, dw, dbias);
  else
    block<CR, false>(g, relu_out, p, col, dw, nullptr);
}

using RowPartFn = void (*)(const float*, const float*, int64_t, const float*, float*, float*);
constexpr RowPartFn kRowParts[] = {rowPart<1>, rowPart<2>, rowPart<3>, rowPart<4>, rowPart<5>,
                                   rowPart<6>, rowPart<7>, rowPart<8>, rowPart<9>, rowPart<10>};

}  // namespace

void weightGradRows(const float* dy, const float* relu_out, int64_t m, int64_t p, const float* col, int64_t n,
                    float* dw, float* dbias) {
  for (int64_t i = 0; i < m; ++i) {
    const float* g = dy + i * p;
    const float* y = relu_out ? relu_out + i * p : nullptr;
    for (int64_t j = 0; j < n; j += 10) {
      const int64_t cr = n - j < 10 ? n - j : 10;
      kRowParts[cr - 1](g, y, p, col + j * p, dw + i * n + j, j == 0 && dbias ? dbias + i : nullptr);
    }
  }
}

}  // namespace dtrain::ops::avx512
