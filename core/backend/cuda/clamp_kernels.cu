// The relu6 maps of clamp_kernels.h: grid-stride loops, each element the CPU
// layer's expression (core/nn/layers/relu6.cpp), templated on the element
// type (for float the loads and stores convert nothing, so the fp32 results
// are the same as ever).
#include "core/backend/cuda/clamp_kernels.h"
#include "core/backend/cuda/half_io.cuh"
#include "core/backend/cuda/launch_shape.h"
#include "core/backend/fused_activation.h"

namespace dtrain::cuda {

namespace {

using ops::FusedActivation;

// The CPU layer's expressions (core/backend/fused_activation.h), not
// fminf/fmaxf, which would turn a NaN into a bound.
template <typename T>
__global__ void relu6ForwardKernel(const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fromFloat<T>(ops::activate<FusedActivation::Relu6>(toFloat(x[i])));
}

template <typename T>
__global__ void relu6BackwardKernel(const T* y, const T* dy, T* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = fromFloat<T>(ops::maskGrad<FusedActivation::Relu6>(toFloat(y[i]), toFloat(dy[i])));
}

}  // namespace

void relu6Forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  relu6Forward(x, y, DType::F32, n, stream);
}

void relu6Backward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  relu6Backward(y, dy, dx, DType::F32, n, stream);
}

void relu6Forward(const void* x, void* y, DType dtype, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    relu6ForwardKernel<T><<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(static_cast<const T*>(x),
                                                                                   static_cast<T*>(y), n);
  });
}

void relu6Backward(const void* y, const void* dy, void* dx, DType dtype, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    relu6BackwardKernel<T><<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(
        static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx), n);
  });
}

}  // namespace dtrain::cuda
