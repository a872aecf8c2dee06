// The element-wise sum of the add layer (core/nn/layers/add.h) on the GPU: one
// float addition per element, as on the CPU, so the results are the same
// numbers. Queued on `stream`, never synchronising; device pointers; n = 0
// queues nothing.
//
// The whole sum of every input, and a fused relu, is computed in float and
// stored once: on 16-bit tensors (bf16, fp16) rounded to the dtype, as the
// CPU's reference path sums in fp32 and rounds the layer's result (a running
// sum stored in 16 bits between inputs would not be the same numbers).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor/tensor.h"

namespace dtrain::cuda {

// Inputs one pass of sumOf below reads; more take a pass per this many.
constexpr int kSumInputsPerPass = 8;

// y = act(((x[0] + x[1]) + x[2]) + ...) over `count` >= 1 inputs of n
// elements of `dtype`, summed in float in that order (the CPU layer's) and
// stored rounded to the dtype; act = relu (the CPU's max(v, 0), a NaN passes)
// when `relu`, else the identity. y may equal an input. With more than
// kSumInputsPerPass inputs the running sum is carried between passes in
// `partial`, n floats of the caller's (null otherwise).
void sumOf(const void* const* x, int count, DType dtype, void* y, int64_t n, bool relu, float* partial,
           cudaStream_t stream);

}  // namespace dtrain::cuda
