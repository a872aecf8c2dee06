// relu6 on the GPU (core/nn/layers/relu6.h), with the CPU layer's expressions,
// so the results are the same numbers bit for bit (a NaN passes through).
//
// Every function queues its work on `stream` and returns without
// synchronising; pointers are device memory; n = 0 queues nothing.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dtrain::cuda {

// y = min(max(x, 0), 6); x may equal y.
void relu6Forward(const float* x, float* y, int64_t n, cudaStream_t stream);
// dx = 0 < y < 6 ? dy : 0, where y is relu6's output; dx may equal dy.
void relu6Backward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream);

}  // namespace dtrain::cuda
