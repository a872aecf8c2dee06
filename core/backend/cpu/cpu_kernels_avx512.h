// The AVX-512 kernels (files named *_avx512.cpp, compiled for x86-64-v4),
// called only when cpu::activeLevel() is Avx512 or above. Those files include
// no standard-library header: an inline function they instantiated could be
// the copy the linker keeps for the whole binary, and would then carry 512-bit
// instructions into the baseline path on hosts without them.
// Internal to core/backend/cpu.
#pragma once
#include <cstdint>

#include "core/backend/cpu/winograd4x4_algebra.h"

namespace dtrain::ops::avx512 {

// ops::gemmUnpacked's contract, c[m,n] = act(op(a)[m,k] * b[k,n] + row_bias[m]), for k >= 1.
void gemmUnpacked(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* c, int64_t ldc, const float* row_bias, bool relu);

// Winograd F(4x4,3x3)'s activation transforms: ops.h's contracts for the
// call's geometry d (winograd4::dims) and the input's channels.
void winograd4x4InputTransform(const float* x, int64_t n, int64_t channels, const winograd4::Dims& d, float* v,
                               int64_t ldv, int64_t plane);
void winograd4x4OutputTransform(const float* m, int64_t ldm, int64_t plane, int64_t n, int64_t filters,
                                const winograd4::Dims& d, const float* bias, bool relu, float* y);
void winograd4x4GradOutputTransform(const float* dy, const float* relu_out, int64_t n, int64_t filters,
                                    const winograd4::Dims& d, float* z, int64_t ldz, int64_t plane);
void winograd4x4GradInputTransform(const float* dv, int64_t ldv, int64_t plane, int64_t n, int64_t channels,
                                   const winograd4::Dims& d, float* dx);

}  // namespace dtrain::ops::avx512
