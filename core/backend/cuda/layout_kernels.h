// Between a convolution's NCHW tensors and their channels-last (NHWC) copies,
// queued on a stream: each is a transposition of the last two extents of a
// [batches, rows, cols] array (NCHW -> NHWC: rows = C, cols = H x W; back:
// rows = H x W, cols = C; filters [F, C, kh x kw] <-> [F, kh x kw, C]).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor/tensor.h"

namespace dtrain::cuda {

// dst[b, c, r] = src[b, r, c] for elements of `dtype`; src and dst do not overlap.
void transposeLastTwo(const void* src, void* dst, DType dtype, int64_t batches, int64_t rows, int64_t cols,
                      cudaStream_t stream);

}  // namespace dtrain::cuda
