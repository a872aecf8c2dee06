// Elementwise fills on the device, queued on a stream.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dtrain::cuda {

// x[i] = value for i < n.
void fill(float* x, int64_t n, float value, cudaStream_t stream);
// y[i] = a * x[i] + y[i] for i < n.
void axpy(float a, const float* x, float* y, int64_t n, cudaStream_t stream);

}  // namespace dtrain::cuda
