// The AVX-512 kernels (files named *_avx512.cpp, compiled for x86-64-v4),
// called only when cpu::activeLevel() is Avx512 or above. Those files include
// no standard-library header: an inline function they instantiated could be
// the copy the linker keeps for the whole binary, and would then carry 512-bit
// instructions into the baseline path on hosts without them.
// Internal to core/backend/cpu.
#pragma once
#include <cstdint>

#include "core/backend/cpu/winograd_dims.h"

namespace dtrain::ops::avx512 {

// ops::gemmUnpacked's contract, c[m,n] = act(op(a)[m,k] * b[k,n] + row_bias[m]), for k >= 1.
void gemmUnpacked(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* c, int64_t ldc, const float* row_bias, bool relu);

// ops::weightGradRows's contract.
void weightGradRows(const float* dy, const float* relu_out, int64_t m, int64_t p, const float* col, int64_t n,
                    float* dw, float* dbias);

// pool_2x2.h's contracts: 2x2 stride-2 max pooling of `planes` h x w planes.
void maxPool2x2Forward(const float* x, int64_t planes, int64_t h, int64_t w, float* y, int32_t* argmax);
void maxPool2x2Backward(const float* dy, const int32_t* argmax, int64_t planes, int64_t h, int64_t w,
                        float* dx);

// Winograd F(2x2,3x3)'s activation transforms: ops.h's contracts for the
// call's geometry d (winograd::dims) and the input's channels.
void winograd2x2InputTransform(const float* x, int64_t n, int64_t channels, const winograd::Dims& d, float* v,
                               int64_t ldv, int64_t plane);
void winograd2x2OutputTransform(const float* m, int64_t ldm, int64_t plane, int64_t n, int64_t filters,
                                const winograd::Dims& d, const float* bias, bool relu, float* y);
void winograd2x2GradOutputTransform(const float* dy, const float* relu_out, int64_t n, int64_t filters,
                                    const winograd::Dims& d, float* z, int64_t ldz, int64_t plane);
void winograd2x2GradInputTransform(const float* dv, int64_t ldv, int64_t plane, int64_t n, int64_t channels,
                                   const winograd::Dims& d, float* dx);

// F(4x4,3x3)'s, likewise (d from winograd4::dims).
void winograd4x4InputTransform(const float* x, int64_t n, int64_t channels, const winograd4::Dims& d,
                               float* v, int64_t ldv, int64_t plane);
void winograd4x4OutputTransform(const float* m, int64_t ldm, int64_t plane, int64_t n, int64_t filters,
                                const winograd4::Dims& d, const float* bias, bool relu, float* y);
void winograd4x4GradOutputTransform(const float* dy, const float* relu_out, int64_t n, int64_t filters,
                                    const winograd4::Dims& d, float* z, int64_t ldz, int64_t plane);
void winograd4x4GradInputTransform(const float* dv, int64_t ldv, int64_t plane, int64_t n, int64_t channels,
                                   const winograd4::Dims& d, float* dx);

}  // namespace dtrain::ops::avx512
