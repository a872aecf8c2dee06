// The 512-bit FMA loop of register_peaks.h: twelve independent accumulators,
// enough to cover the FMA latency on both FMA ports of current cores.
#include <immintrin.h>

#include "core/bench/register_peaks.h"

namespace dtrain::bench::avx512 {

double fmaLoop512(int64_t iterations) {
  __m512 a = _mm512_set1_ps(1.0000001f), b = _mm512_set1_ps(0.9999999f);
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0,
         c10 = c0, c11 = c0;
  for (int64_t i = 0; i < iterations; ++i) {
    c0 = _mm512_fmadd_ps(a, b, c0);
    c1 = _mm512_fmadd_ps(a, b, c1);
    c2 = _mm512_fmadd_ps(a, b, c2);
    c3 = _mm512_fmadd_ps(a, b, c3);
    c4 = _mm512_fmadd_ps(a, b, c4);
    c5 = _mm512_fmadd_ps(a, b, c5);
    c6 = _mm512_fmadd_ps(a, b, c6);
    c7 = _mm512_fmadd_ps(a, b, c7);
    c8 = _mm512_fmadd_ps(a, b, c8);
    c9 = _mm512_fmadd_ps(a, b, c9);
    c10 = _mm512_fmadd_ps(a, b, c10);
    c11 = _mm512_fmadd_ps(a, b, c11);
    __asm__ volatile("" : "+x"(a));  // a is unknown each round: nothing folds
  }
  // The sums escape, so the loop is not removed.
  __m512 s = ((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7)) + ((c8 + c9) + (c10 + c11));
  __asm__ volatile("" : : "x"(s));
  return 2.0 * 16 * 12 * static_cast<double>(iterations);
}

}  // namespace dtrain::bench::avx512
