#include "core/backend/cuda/convert_kernels.h"

#include "core/backend/cuda/half_io.cuh"
#include "core/backend/cuda/launch_shape.h"

namespace dtrain::cuda {

namespace {

template <typename From, typename To>
__global__ void convertKernel(const From* src, To* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = fromFloat<To>(toFloat(src[i]));
}

template <typename From>
__global__ void accumulateKernel(float* dst, const From* src, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] += toFloat(src[i]);
}

template <typename T>
__global__ void add16Kernel(T* dst, const T* src, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = fromFloat<T>(toFloat(dst[i]) + toFloat(src[i]));
}

__global__ void fill16Kernel(uint16_t* p, int64_t n, uint16_t bits) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = bits;
}

}  // namespace

void convert(const void* src, DType from, void* dst, DType to, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  if (from == to) {
    cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * elementSize(from), cudaMemcpyDeviceToDevice, stream);
    return;
  }
  withElementType(from, [&](auto f) {
    using From = decltype(f);
    withElementType(to, [&](auto t) {
      using To = decltype(t);
      convertKernel<From, To><<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(
          static_cast<const From*>(src), static_cast<To*>(dst), n);
    });
  });
}

void accumulateInto(float* dst, const void* src, DType from, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  withElementType(from, [&](auto f) {
    using From = decltype(f);
    accumulateKernel<From><<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(
        dst, static_cast<const From*>(src), n);
  });
}

void add16(void* dst, const void* src, DType dtype, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    add16Kernel<T><<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(static_cast<T*>(dst),
                                                                             static_cast<const T*>(src), n);
  });
}

void fill16(uint16_t* p, int64_t n, uint16_t bits, cudaStream_t stream) {
  if (n <= 0) return;
  fill16Kernel<<<gridStrideBlocks(n), kElementwiseThreads, 0, stream>>>(p, n, bits);
}

}  // namespace dtrain::cuda
