// The kernels of global_avg_pool_kernels.h. Forward gives each plane one warp
// (the lanes read consecutive elements, so a warp's loads coalesce for small
// planes and large ones alike); backward is a grid-stride loop over dx.
#include "core/backend/cuda/global_avg_pool_kernels.h"
#include "core/backend/cuda/group_cursor.h"
#include "core/backend/cuda/half_io.cuh"
#include "core/backend/cuda/launch_shape.h"

namespace dtrain::cuda {

namespace {

constexpr int kWarp = 32;

// Warp w of the grid pools planes w, w + warps, ...; the loop's condition is
// the same for every lane of a warp, so the whole warp takes part in each
// shuffle.
template <typename T>
__global__ void meanKernel(const T* x, T* y, int64_t planes, int64_t plane, float scale) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / kWarp;
  for (int64_t p = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kWarp; p < planes; p += warps) {
    const T* v = x + p * plane;
    float sum = 0.0f;
    for (int64_t i = lane; i < plane; i += kWarp) sum += toFloat(v[i]);
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) y[p] = fromFloat<T>(sum * scale);  // the CPU's sum * (1 / plane), not a division
  }
}

// dx[i] = dy[i / plane] * scale, the plane index tracked as the group of a
// [1, planes, plane] layout (no 64-bit division per element).
template <typename T>
__global__ void spreadKernel(const T* dy, T* dx, int64_t planes, int64_t plane, float scale) {
  const int64_t total = planes * plane;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (GroupCursor at(i, stride, plane, planes); i < total; i += stride, at.advance())
    dx[i] = fromFloat<T>(toFloat(dy[at.group]) * scale);
}

// 1 / plane in float, as the CPU layer computes its scale.
float meanScale(int64_t plane) { return 1.0f / static_cast<float>(plane); }

}  // namespace

void globalAvgPoolForward(const void* x, void* y, DType dtype, int64_t planes, int64_t plane,
                          cudaStream_t stream) {
  if (planes <= 0 || plane <= 0) return;
  const unsigned blocks = gridStrideBlocks(planes * kWarp);
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    meanKernel<T><<<blocks, kElementwiseThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                              planes, plane, meanScale(plane));
  });
}

void globalAvgPoolBackward(const void* dy, void* dx, DType dtype, int64_t planes, int64_t plane,
                           cudaStream_t stream) {
  if (planes <= 0 || plane <= 0) return;
  const unsigned blocks = gridStrideBlocks(planes * plane);
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    spreadKernel<T><<<blocks, kElementwiseThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<T*>(dx), planes, plane, meanScale(plane));
  });
}

}  // namespace dtrain::cuda
