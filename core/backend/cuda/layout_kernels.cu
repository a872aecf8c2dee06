#include "core/backend/cuda/layout_kernels.h"

#include <algorithm>

#include "core/backend/cuda/half_io.cuh"

namespace dtrain::cuda {

namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // a 32x8 block moves a 32x32 tile in 4 passes

// One 32x32 tile through shared memory, so both the reads and the writes are
// coalesced; the extra column keeps the transposed reads off one bank.
// blockIdx.z strides over the batches (gridDim.z is capped).
template <typename T>
__global__ void transposeKernel(const T* src, T* dst, int64_t batches, int64_t rows, int64_t cols) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t plane = rows * cols;
  const int64_t c0 = int64_t(blockIdx.x) * kTile, r0 = int64_t(blockIdx.y) * kTile;
  for (int64_t b = blockIdx.z; b < batches; b += gridDim.z) {
    const T* s = src + b * plane;
    T* d = dst + b * plane;
    for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
      const int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[i][threadIdx.x] = s[r * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
      const int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (r < rows && c < cols) d[c * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();  // the tile is refilled for the next batch
  }
}

}  // namespace

void transposeLastTwo(const void* src, void* dst, DType dtype, int64_t batches, int64_t rows, int64_t cols,
                      cudaStream_t stream) {
  if (batches <= 0 || rows <= 0 || cols <= 0) return;
  const dim3 block(kTile, kRowsPerPass);
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile),
                  static_cast<unsigned>(std::min<int64_t>(batches, 65535)));
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    transposeKernel<T><<<grid, block, 0, stream>>>(static_cast<const T*>(src), static_cast<T*>(dst), batches,
                                                   rows, cols);
  });
}

}  // namespace dtrain::cuda
