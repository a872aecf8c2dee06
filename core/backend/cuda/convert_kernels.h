// Conversions between a GPU's float and 16-bit tensors, and the fills and
// sums of 16-bit memory, queued on a stream (extents of 0 queue nothing).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor/tensor.h"

namespace dtrain::cuda {

// dst[i] = src[i] converted from `from` to `to` (float to 16 bits rounds to
// nearest even; 16 bits to float is exact; equal types copy).
void convert(const void* src, DType from, void* dst, DType to, int64_t n, cudaStream_t stream);
// dst[i] += src[i] for a float dst and a src of `from` (any dtype): a weight
// gradient a library wrote in 16 bits added to the fp32 gradient buffer.
void accumulateInto(float* dst, const void* src, DType from, int64_t n, cudaStream_t stream);
// dst[i] = dst[i] + src[i], both of 16-bit `dtype`, summed in float and
// rounded to the dtype (a gradient summed over two readers).
void add16(void* dst, const void* src, DType dtype, int64_t n, cudaStream_t stream);
// p[i] = bits for n 16-bit values.
void fill16(uint16_t* p, int64_t n, uint16_t bits, cudaStream_t stream);

}  // namespace dtrain::cuda
