#include "core/backend/cuda/fill_kernels.h"

namespace dtrain::cuda {

namespace {

constexpr int kThreads = 256;

// Grid-stride loops: a grid of bounded size covers any n.
__global__ void fillKernel(float* x, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = value;
}

__global__ void axpyKernel(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fmaf(a, x[i], y[i]);
}

unsigned blocksFor(int64_t n) {
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(wanted < 4096 ? (wanted > 0 ? wanted : 1) : 4096);
}

}  // namespace

void fill(float* x, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  fillKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, n, value);
}

void axpy(float a, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  axpyKernel<<<blocksFor(n), kThreads, 0, stream>>>(a, x, y, n);
}

}  // namespace dtrain::cuda
