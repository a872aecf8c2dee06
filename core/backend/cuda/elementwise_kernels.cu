// The elementwise maps of elementwise_kernels.h (bias + activation, relu,
// scale); the reductions are in elementwise_reductions.cu. Each expression is
// the CPU's (cpu/bias_act.cpp), so results agree bit for bit.
#include "core/backend/cuda/elementwise_kernels.h"
#include "core/backend/cuda/group_cursor.h"
#include "core/backend/cuda/launch_shape.h"

namespace dtrain::cuda {

namespace {

// std::max(v, 0.0f) exactly, as the CPU computes it: a NaN passes through and
// -0.0 stays -0.0 (fmaxf would turn a NaN into 0).
__device__ inline float reluOf(float v) { return v < 0.0f ? 0.0f : v; }

// y = act(y + b) with b = bias[group], or 0 when bias is null (the CPU's
// planes variant adds that 0, which turns -0.0 into +0.0; kept for equality).
template <bool kRelu>
__global__ void biasActKernel(float* y, const float* bias, int64_t total, int64_t plane, int64_t groups) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  GroupCursor at(i, stride, plane, groups);
  for (; i < total; i += stride, at.advance()) {
    const float v = y[i] + (bias ? bias[at.group] : 0.0f);
    y[i] = kRelu ? reluOf(v) : v;
  }
}

__global__ void reluForwardKernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = reluOf(x[i]);
}

__global__ void reluBackwardKernel(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void scaleKernel(float* x, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= s;
}

// y over `total` elements in groups of `plane`, bias indexed by the group modulo `groups`.
void launchBiasAct(float* y, const float* bias, int64_t total, int64_t plane, int64_t groups, bool relu,
                   cudaStream_t stream) {
  const unsigned blocks = gridStrideBlocks(total);
  if (relu)
    biasActKernel<true><<<blocks, kElementwiseThreads, 0, stream>>>(y, bias, total, plane, groups);
  else
    biasActKernel<false><<<blocks, kElementwiseThreads, 0, stream>>>(y, bias, total, plane, groups);
}

}  // namespace

void biasActRows(float* y, const float* bias, int64_t rows, int64_t cols, bool relu, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (bias)
    launchBiasAct(y, bias, rows * cols, 1, cols, relu, stream);
  else if (relu)
    reluForward(y, y, rows * cols, stream);  // the CPU's rows variant: max(y, 0), no + 0
}

void biasActPlanes(float* y, const float* bias, int64_t n, int64_t channels, int64_t plane, bool relu,
                   cudaStream_t stream) {
  if (n <= 0 || channels <= 0 || plane <= 0 || (!bias && !relu)) return;
  launchBiasAct(y, bias, n * channels * plane, plane, channels, relu, stream);
}

void reluForward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  reluForwardKernel<<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(x, y, n);
}

void reluBackward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  reluBackwardKernel<<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(y, dy, dx, n);
}

void scale(float* x, int64_t n, float s, cudaStream_t stream) {
  if (n <= 0) return;
  scaleKernel<<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(x, n, s);
}

}  // namespace dtrain::cuda
