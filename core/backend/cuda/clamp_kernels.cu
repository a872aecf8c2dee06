// The relu6 maps of clamp_kernels.h: grid-stride loops, each element the CPU
// layer's expression (core/nn/layers/relu6.cpp).
#include "core/backend/cuda/clamp_kernels.h"
#include "core/backend/cuda/launch_shape.h"

namespace dtrain::cuda {

namespace {

// std::min(std::max(v, 0.0f), 6.0f) exactly: max is (v < 0 ? 0 : v) and min
// (6 < v ? 6 : v), so a NaN passes through and -0.0 stays -0.0 (fminf/fmaxf
// would turn a NaN into a bound).
__device__ inline float relu6Of(float v) {
  const float m = v < 0.0f ? 0.0f : v;
  return 6.0f < m ? 6.0f : m;
}

__global__ void relu6ForwardKernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = relu6Of(x[i]);
}

__global__ void relu6BackwardKernel(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = y[i];
    dx[i] = (v > 0.0f && v < 6.0f) ? dy[i] : 0.0f;
  }
}

}  // namespace

void relu6Forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  relu6ForwardKernel<<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(x, y, n);
}

void relu6Backward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  relu6BackwardKernel<<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(y, dy, dx, n);
}

}  // namespace dtrain::cuda
