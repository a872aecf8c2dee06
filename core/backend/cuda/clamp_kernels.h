// relu6 on the GPU (core/nn/layers/relu6.h), with the CPU layer's expressions,
// so the results are the same numbers bit for bit (a NaN passes through).
// On 16-bit tensors (bf16, fp16) each value is loaded as a float, clamped and
// stored rounded to its dtype: a clamp of a 16-bit value is that value or a
// bound, so nothing is rounded in fact, and the CPU's reference path agrees.
//
// Every function queues its work on `stream` and returns without
// synchronising; pointers are device memory; n = 0 queues nothing.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor/tensor.h"

namespace dtrain::cuda {

// y = min(max(x, 0), 6); x may equal y.
void relu6Forward(const float* x, float* y, int64_t n, cudaStream_t stream);
// dx = 0 < y < 6 ? dy : 0, where y is relu6's output; dx may equal dy.
void relu6Backward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream);

// The same on n elements of `dtype` (all pointers to that dtype).
void relu6Forward(const void* x, void* y, DType dtype, int64_t n, cudaStream_t stream);
void relu6Backward(const void* y, const void* dy, void* dx, DType dtype, int64_t n, cudaStream_t stream);

}  // namespace dtrain::cuda
