// Global average pooling (core/nn/layers/global_avg_pool.h) on the GPU for
// 16-bit activations (bf16, fp16): the CPU layer's expressions, each plane
// summed in float and the mean stored rounded to the dtype, so the results
// are the CPU's reference path's up to the order of the float sum (a warp's
// lanes take interleaved parts of a plane, then add their sums as a tree).
// The fp32 layer pools through cuDNN (cudnn_pool.h); these are used for the
// 16-bit formats, where cuDNN documents no accumulation type and a plane of
// thousands of values summed in 16 bits would lose its low terms.
//
// Every function queues its work on `stream` and returns without
// synchronising; pointers are device memory of `dtype` (any of the three);
// `planes` = samples x channels of `plane` >= 1 elements each; planes = 0
// queues nothing.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor/tensor.h"

namespace dtrain::cuda {

// y[p] = (sum over i of x[p, i]) * (1 / plane).
void globalAvgPoolForward(const void* x, void* y, DType dtype, int64_t planes, int64_t plane,
                          cudaStream_t stream);
// dx[p, i] = dy[p] * (1 / plane) for every i.
void globalAvgPoolBackward(const void* dy, void* dx, DType dtype, int64_t planes, int64_t plane,
                           cudaStream_t stream);

}  // namespace dtrain::cuda
