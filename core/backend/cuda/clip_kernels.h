// Global-norm gradient clipping on the device: the sum of squares, the factor
// (core/optim/clip_rule.h, the CPU's formula) and the scaling are all queued
// on the stream, so a GPU step clips without reading the norm back to the
// host and without waiting for the device.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dtrain::cuda {

// x *= clip_rule::factor(sum of x[i]^2, max_norm). The sum is deterministic
// (elementwise_kernels.h's sumOfSquares); its double lives in stream-ordered
// scratch memory.
void clipByNorm(float* x, int64_t n, double max_norm, cudaStream_t stream);

}  // namespace dtrain::cuda
