// weightGradRows: dw += g col^T (+ the bias gradient) as dot products, for the
// first layer's weight gradient, where dw is tiny (filters x kh*kw) and the
// inner dimension long (the output plane). gemm's packing dominates at that
// shape; here each row of dw keeps its dot products in vector accumulators
// over the plane, with the fused relu's mask and the bias sums applied on the
// fly instead of in separate passes over dy.
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

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One vector step of block(): masked only for the plane's last, partial vector.
template <int FR, int CR, bool kBias, bool kMasked>
inline __attribute__((always_inline)) void step(const float* dy, const float* relu_out, int64_t p,
                                                const float* col, int64_t t, __m256i mask,
                                                __m256 (&acc)[FR][CR], __m256 (&bacc)[FR]) {
  auto load = [&](const float* q) { return kMasked ? _mm256_maskload_ps(q, mask) : _mm256_loadu_ps(q); };
  __m256 g[FR];
#pragma GCC unroll 4
  for (int i = 0; i < FR; ++i) {
    g[i] = load(dy + i * p + t);
    if (relu_out)
      g[i] = _mm256_and_ps(_mm256_cmp_ps(load(relu_out + i * p + t), _mm256_setzero_ps(), _CMP_GT_OQ), g[i]);
    if (kBias) bacc[i] = _mm256_add_ps(bacc[i], g[i]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < CR; ++j) {
    const __m256 c = load(col + j * p + t);
#pragma GCC unroll 4
    for (int i = 0; i < FR; ++i) acc[i][j] = _mm256_fmadd_ps(g[i], c, acc[i][j]);
  }
}

// g's rows [0, FR) against col's rows [0, CR); with kBias also their sums.
template <int FR, int CR, bool kBias>
void block(const float* dy, const float* relu_out, int64_t p, const float* col, float* dw, int64_t ldw,
           float* dbias) {
  __m256 acc[FR][CR], bacc[FR];
  for (int i = 0; i < FR; ++i) {
    bacc[i] = _mm256_setzero_ps();
    for (int j = 0; j < CR; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  const __m256i none = _mm256_setzero_si256();
  int64_t t = 0;
  for (; t + 8 <= p; t += 8) step<FR, CR, kBias, false>(dy, relu_out, p, col, t, none, acc, bacc);
  if (t < p) step<FR, CR, kBias, true>(dy, relu_out, p, col, t, simd::laneMask(p - t), acc, bacc);
  for (int i = 0; i < FR; ++i) {
    for (int j = 0; j < CR; ++j) dw[i * ldw + j] += hsum(acc[i][j]);
    if (kBias) dbias[i] += hsum(bacc[i]);
  }
}

// One row of g against col's rows [j, j + CR), CR = 1..10 chosen at run time.
template <int CR>
void rowPart(const float* dy, const float* relu_out, int64_t p, const float* col, float* dw, int64_t ldw,
             float* dbias) {
  if (dbias)
    block<1, CR, true>(dy, relu_out, p, col, dw, ldw, dbias);
  else
    block<1, CR, false>(dy, relu_out, p, col, dw, ldw, nullptr);
}

using RowPartFn = void (*)(const float*, const float*, int64_t, const float*, float*, int64_t, float*);
constexpr RowPartFn kRowParts[] = {rowPart<1>, rowPart<2>, rowPart<3>, rowPart<4>, rowPart<5>,
                                   rowPart<6>, rowPart<7>, rowPart<8>, rowPart<9>, rowPart<10>};

void weightGradRows256(const float* dy, const float* relu_out, int64_t m, int64_t p, const float* col,
                       int64_t n, float* dw, float* dbias) {
  // One row of g at a time against up to 10 rows of col: the row is loaded and
  // masked once per 10 dot products (a 3x3 kernel's 9 fit in one pass), with
  // 11 accumulators in registers.
  for (int64_t i = 0; i < m; ++i) {
    const float* g = dy + i * p;
    const float* y = relu_out ? relu_out + i * p : nullptr;
    for (int64_t j = 0; j < n; j += 10) {
      const int64_t cr = n - j < 10 ? n - j : 10;
      kRowParts[cr - 1](g, y, p, col + j * p, dw + i * n + j, n, j == 0 && dbias ? dbias + i : nullptr);
    }
  }
}

}  // namespace

#else

namespace {

void weightGradRows256(const float* dy, const float* relu_out, int64_t m, int64_t p, const float* col,
                       int64_t n, float* dw, float* dbias) {
  for (int64_t i = 0; i < m; ++i) {
    const float* g = dy + i * p;
    const float* y = relu_out ? relu_out + i * p : nullptr;
    float bsum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int64_t t = 0; t < p; ++t) s += (y && !(y[t] > 0.0f)) ? 0.0f : g[t] * col[j * p + t];
      dw[i * n + j] += s;
    }
    if (dbias) {
      for (int64_t t = 0; t < p; ++t) bsum += (y && !(y[t] > 0.0f)) ? 0.0f : g[t];
      dbias[i] += bsum;
    }
  }
}

}  // namespace

#endif

void weightGradRowsAtLevel(cpu::Level level, const float* dy, const float* relu_out, int64_t m, int64_t p,
                           const float* col, int64_t n, float* dw, float* dbias) {
  if (level >= cpu::Level::Avx512)
    avx512::weightGradRows(dy, relu_out, m, p, col, n, dw, dbias);
  else
    weightGradRows256(dy, relu_out, m, p, col, n, dw, dbias);
}

void weightGradRows(const float* dy, const float* relu_out, int64_t m, int64_t p, const float* col, int64_t n,
                    float* dw, float* dbias) {
  static const cpu::Level level = cpu::activeLevel();
  weightGradRowsAtLevel(level, dy, relu_out, m, p, col, n, dw, dbias);
}

}  // namespace dtrain::ops
