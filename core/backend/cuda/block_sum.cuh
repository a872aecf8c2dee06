// The sum of a double over a thread block, shared by the backend's reduction
// kernels (elementwise_reductions.cu, batch_norm_kernels.cu). Used only by
// .cu files.
#pragma once

namespace dtrain::cuda {

// The sum of v over a block of kThreads threads (a multiple of 32), valid in
// thread 0. warp_sums: kThreads / 32 doubles of shared memory. A kernel may
// call it several times with the same warp_sums.
template <int kThreads>
__device__ inline double blockSum(double v, double* warp_sums) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  __syncthreads();  // warp_sums may still be read from the previous call
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
  return total;
}

}  // namespace dtrain::cuda
