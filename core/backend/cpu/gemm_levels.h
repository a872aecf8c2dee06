// The matrix-product kernels of each CPU level, callable side by side (the
// tests hold the AVX-512 ones to the AVX2 ones and to a double-precision
// product; benchmarks time them). ops::gemm and ops::gemmUnpacked call these
// at cpu::activeLevel(). Internal to core/backend/cpu.
#pragma once
#include <cstdint>

#include "core/backend/cpu/cpu_level.h"

namespace dtrain::ops {

// ops::gemm's contract, computed by `level`'s kernels.
void gemmAtLevel(cpu::Level level, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// ops::gemmUnpacked's contract, computed by `level`'s kernels.
void gemmUnpackedAtLevel(cpu::Level level, bool trans_a, int64_t m, int64_t n, int64_t k, const float* a,
                         int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                         const float* row_bias, bool relu);

// ops::weightGradRows's contract, computed by `level`'s kernels.
void weightGradRowsAtLevel(cpu::Level level, const float* dy, const float* relu_out, int64_t m, int64_t p,
                           const float* col, int64_t n, float* dw, float* dbias);

}  // namespace dtrain::ops
