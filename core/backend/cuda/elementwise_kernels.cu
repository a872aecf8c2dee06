// The elementwise maps of elementwise_kernels.h (bias + activation, relu,
// scale); the reductions are in elementwise_reductions.cu. Each expression is
// the CPU's (cpu/bias_act.cpp), so results agree bit for bit. The kernels are
// templates on the element type: loaded through toFloat, computed in float,
// stored through fromFloat (half_io.cuh), which for float are the identity,
// so the float functions compute exactly what they always have.
#include "core/backend/cuda/elementwise_kernels.h"
#include "core/backend/cuda/group_cursor.h"
#include "core/backend/cuda/half_io.cuh"
#include "core/backend/cuda/launch_shape.h"

namespace dtrain::cuda {

namespace {

// std::max(v, 0.0f) exactly, as the CPU computes it: a NaN passes through and
// -0.0 stays -0.0 (fmaxf would turn a NaN into 0).
__device__ inline float reluOf(float v) { return v < 0.0f ? 0.0f : v; }

// y = act(y + b) with b = bias[group], or 0 when bias is null (the CPU's
// planes variant adds that 0, which turns -0.0 into +0.0; kept for equality).
template <typename T, bool kRelu>
__global__ void biasActKernel(T* y, const T* bias, int64_t total, int64_t plane, int64_t groups) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  GroupCursor at(i, stride, plane, groups);
  for (; i < total; i += stride, at.advance()) {
    const float v = toFloat(y[i]) + (bias ? toFloat(bias[at.group]) : 0.0f);
    y[i] = fromFloat<T>(kRelu ? reluOf(v) : v);
  }
}

template <typename T>
__global__ void reluForwardKernel(const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fromFloat<T>(reluOf(toFloat(x[i])));
}

template <typename T>
__global__ void reluBackwardKernel(const T* y, const T* dy, T* dx, int64_t n) {
  const T zero = fromFloat<T>(0.0f);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = toFloat(y[i]) > 0.0f ? dy[i] : zero;
}

__global__ void scaleKernel(float* x, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= s;
}

template <typename T>
void launchReluForward(const T* x, T* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  reluForwardKernel<T><<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(x, y, n);
}

template <typename T>
void launchReluBackward(const T* y, const T* dy, T* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  reluBackwardKernel<T><<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(y, dy, dx, n);
}

// y over `total` elements in groups of `plane`, bias indexed by the group modulo `groups`.
template <typename T>
void launchBiasAct(T* y, const T* bias, int64_t total, int64_t plane, int64_t groups, bool relu,
                   cudaStream_t stream) {
  const unsigned blocks = gridStrideBlocks(total);
  if (relu)
    biasActKernel<T, true><<<blocks, kElementwiseThreads, 0, stream>>>(y, bias, total, plane, groups);
  else
    biasActKernel<T, false><<<blocks, kElementwiseThreads, 0, stream>>>(y, bias, total, plane, groups);
}

template <typename T>
void biasActRowsOf(T* y, const T* bias, int64_t rows, int64_t cols, bool relu, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (bias)
    launchBiasAct(y, bias, rows * cols, 1, cols, relu, stream);
  else if (relu)
    launchReluForward<T>(y, y, rows * cols, stream);  // the CPU's rows variant: max(y, 0), no + 0
}

template <typename T>
void biasActPlanesOf(T* y, const T* bias, int64_t n, int64_t channels, int64_t plane, bool relu,
                     cudaStream_t stream) {
  if (n <= 0 || channels <= 0 || plane <= 0 || (!bias && !relu)) return;
  launchBiasAct(y, bias, n * channels * plane, plane, channels, relu, stream);
}

}  // namespace

void biasActRows(float* y, const float* bias, int64_t rows, int64_t cols, bool relu, cudaStream_t stream) {
  biasActRowsOf(y, bias, rows, cols, relu, stream);
}

void biasActPlanes(float* y, const float* bias, int64_t n, int64_t channels, int64_t plane, bool relu,
                   cudaStream_t stream) {
  biasActPlanesOf(y, bias, n, channels, plane, relu, stream);
}

void reluForward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  launchReluForward(x, y, n, stream);
}

void reluBackward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  launchReluBackward(y, dy, dx, n, stream);
}

void scale(float* x, int64_t n, float s, cudaStream_t stream) {
  if (n <= 0) return;
  scaleKernel<<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(x, n, s);
}

void biasActRows(void* y, const void* bias, DType dtype, int64_t rows, int64_t cols, bool relu,
                 cudaStream_t stream) {
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    biasActRowsOf(static_cast<T*>(y), static_cast<const T*>(bias), rows, cols, relu, stream);
  });
}

void biasActPlanes(void* y, const void* bias, DType dtype, int64_t n, int64_t channels, int64_t plane,
                   bool relu, cudaStream_t stream) {
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    biasActPlanesOf(static_cast<T*>(y), static_cast<const T*>(bias), n, channels, plane, relu, stream);
  });
}

void reluForward(const void* x, void* y, DType dtype, int64_t n, cudaStream_t stream) {
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    launchReluForward(static_cast<const T*>(x), static_cast<T*>(y), n, stream);
  });
}

void reluBackward(const void* y, const void* dy, void* dx, DType dtype, int64_t n, cudaStream_t stream) {
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    launchReluBackward(static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx), n, stream);
  });
}

}  // namespace dtrain::cuda
