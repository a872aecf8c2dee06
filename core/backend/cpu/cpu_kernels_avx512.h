// The AVX-512 kernels (files named *_avx512.cpp, compiled for x86-64-v4),
// called only when cpu::activeLevel() is Avx512 or above. Those files include
// no standard-library header: an inline function they instantiated could be
// the copy the linker keeps for the whole binary, and would then carry 512-bit
// instructions into the baseline path on hosts without them.
// Internal to core/backend/cpu.
#pragma once
#include <cstdint>

namespace dtrain::ops::avx512 {

// ops::gemmUnpacked's contract, c[m,n] = act(op(a)[m,k] * b[k,n] + row_bias[m]), for k >= 1.
void gemmUnpacked(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* c, int64_t ldc, const float* row_bias, bool relu);

}  // namespace dtrain::ops::avx512
