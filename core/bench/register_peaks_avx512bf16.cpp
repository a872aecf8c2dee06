// The bf16 dot-product loop of register_peaks.h (vdpbf16ps: per lane, two
// bf16 products added to an fp32 sum), twelve independent accumulators.
#include <immintrin.h>

#include "core/bench/register_peaks.h"

namespace dtrain::bench::avx512_bf16 {

double dotBf16Loop512(int64_t iterations) {
  __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3f80);  // 1.0, 1.0
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0,
         c9 = c0, c10 = c0, c11 = c0;
  for (int64_t i = 0; i < iterations; ++i) {
    c0 = _mm512_dpbf16_ps(c0, a, b);
    c1 = _mm512_dpbf16_ps(c1, a, b);
    c2 = _mm512_dpbf16_ps(c2, a, b);
    c3 = _mm512_dpbf16_ps(c3, a, b);
    c4 = _mm512_dpbf16_ps(c4, a, b);
    c5 = _mm512_dpbf16_ps(c5, a, b);
    c6 = _mm512_dpbf16_ps(c6, a, b);
    c7 = _mm512_dpbf16_ps(c7, a, b);
    c8 = _mm512_dpbf16_ps(c8, a, b);
    c9 = _mm512_dpbf16_ps(c9, a, b);
    c10 = _mm512_dpbf16_ps(c10, a, b);
    c11 = _mm512_dpbf16_ps(c11, a, b);
    __asm__ volatile("" : "+v"(a));
  }
  __m512 s = ((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7)) + ((c8 + c9) + (c10 + c11));
  __asm__ volatile("" : : "v"(s));
  return 4.0 * 16 * 12 * static_cast<double>(iterations);
}

}  // namespace dtrain::bench::avx512_bf16
