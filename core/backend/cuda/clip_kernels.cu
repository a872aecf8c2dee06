#include "core/backend/cuda/clip_kernels.h"
#include "core/backend/cuda/elementwise_kernels.h"
#include "core/backend/cuda/launch_shape.h"
#include "core/backend/cuda/stream_scratch.cuh"
#include "core/optim/clip_rule.h"

namespace dtrain::cuda {

namespace {

// Every thread computes the same factor from the one sum: cheaper than a
// launch of its own to compute it once.
__global__ void scaleByClipFactorKernel(float* x, int64_t n, const double* sum_of_squares, double max_norm) {
  const float factor = clip_rule::factor(*sum_of_squares, max_norm);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= factor;
}

}  // namespace

void clipByNorm(float* x, int64_t n, double max_norm, cudaStream_t stream) {
  if (n <= 0 || max_norm <= 0.0) return;
  StreamScratch sum(sizeof(double), stream, "the gradient norm");
  sumOfSquares(x, n, sum.as<double>(), stream);
  scaleByClipFactorKernel<<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(x, n, sum.as<double>(),
                                                                                   max_norm);
}

}  // namespace dtrain::cuda
