// Dropout on the GPU with exactly the CPU's mask and scale (ops.h
// dropoutForward / dropoutBackward; the mask is core/backend/dropout_mask.h,
// one definition for both), so a sample keeps the same elements on every
// device, thread and rank. Queued on `stream`, never synchronising; device
// pointers; rows = samples of `cols` elements; rate in [0, 1). With
// key.on_device the seed and first sample are read from there when the kernel
// runs (a step recorded as a CUDA graph replays with each step's own).
// On 16-bit tensors (bf16, fp16) the mask is the same (it depends only on the
// key and the element's place); a kept value is scaled in float and stored
// rounded to the dtype, as the CPU's reference path rounds the layer's result.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/backend/ops.h"
#include "core/tensor/tensor.h"

namespace dtrain::cuda {

// y = keep ? x / (1 - rate) : 0. y must not overlap x.
void dropoutForward(const float* x, float* y, int64_t rows, int64_t cols, float rate,
                    const ops::DropoutKey& key, cudaStream_t stream);
// dx = keep ? dy / (1 - rate) : 0 with the forward's mask.
void dropoutBackward(const float* dy, float* dx, int64_t rows, int64_t cols, float rate,
                     const ops::DropoutKey& key, cudaStream_t stream);

// The same on tensors of `dtype` (x, y, dy, dx all of it).
void dropoutForward(const void* x, void* y, DType dtype, int64_t rows, int64_t cols, float rate,
                    const ops::DropoutKey& key, cudaStream_t stream);
void dropoutBackward(const void* dy, void* dx, DType dtype, int64_t rows, int64_t cols, float rate,
                     const ops::DropoutKey& key, cudaStream_t stream);

}  // namespace dtrain::cuda
