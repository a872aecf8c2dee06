// The 2x2, stride-2, unpadded max pooling that image networks use after most
// convolutions, vectorised (AVX2, and AVX-512 in pool_2x2_avx512.cpp) and
// fused into single passes: forward writes the maximum and its index;
// backward writes every input element once (the gradient at the argmax, zero
// elsewhere) instead of zeroing and scattering. Internal to core/backend/cpu;
// pool.cpp dispatches to it.
#pragma once
#include <cstdint>

#include "core/backend/cpu/cpu_level.h"

namespace dtrain::ops::detail {

// False when this build has no vectorised version (then the caller falls
// back). Computed by cpu::activeLevel()'s kernels.
bool maxPool2x2Forward(const float* x, int64_t planes, int64_t h, int64_t w, float* y, int32_t* argmax);
bool maxPool2x2Backward(const float* dy, const int32_t* argmax, int64_t planes, int64_t h, int64_t w,
                        float* dx);

}  // namespace dtrain::ops::detail

namespace dtrain::ops::detail {

// The same, by `level`'s kernels (the tests compare the levels).
bool maxPool2x2ForwardAtLevel(cpu::Level level, const float* x, int64_t planes, int64_t h, int64_t w,
                              float* y, int32_t* argmax);
bool maxPool2x2BackwardAtLevel(cpu::Level level, const float* dy, const int32_t* argmax, int64_t planes,
                               int64_t h, int64_t w, float* dx);

}  // namespace dtrain::ops::detail
