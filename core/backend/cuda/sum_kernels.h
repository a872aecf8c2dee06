// The element-wise sum of the add layer (core/nn/layers/add.h) on the GPU: one
// float addition per element, as on the CPU, so the results are the same
// numbers. Queued on `stream`, never synchronising; device pointers; n = 0
// queues nothing.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dtrain::cuda {

// y = a + b; y may equal a or b (the running sum of three or more inputs).
void sumOf(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);

}  // namespace dtrain::cuda
