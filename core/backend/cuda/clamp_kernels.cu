// The relu6 maps of clamp_kernels.h: grid-stride loops, each element the CPU
// layer's expression (core/nn/layers/relu6.cpp).
#include "core/backend/cuda/clamp_kernels.h"
#include "core/backend/cuda/launch_shape.h"
#include "core/backend/fused_activation.h"

namespace dtrain::cuda {

namespace {

using ops::FusedActivation;

// The CPU layer's expressions (core/backend/fused_activation.h), not
// fminf/fmaxf, which would turn a NaN into a bound.
__global__ void relu6ForwardKernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = ops::activate<FusedActivation::Relu6>(x[i]);
}

__global__ void relu6BackwardKernel(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = ops::maskGrad<FusedActivation::Relu6>(y[i], dy[i]);
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
