// One thread per element (grid-stride), each recomputing its row's key: a
// splitmix64 and two 32-bit mixes cost less than the element's memory traffic.
#include "core/backend/cuda/dropout_kernels.h"
#include "core/backend/cuda/group_cursor.h"
#include "core/backend/cuda/launch_shape.h"
#include "core/backend/dropout_mask.h"

namespace dtrain::cuda {

namespace {

// out[r, e] = keep(r, e) ? in[r, e] * scale : 0; the row of element i is
// tracked as the "group" of a [1, rows, cols] layout.
__global__ void dropoutKernel(const float* in, float* out, int64_t rows, int64_t cols, uint64_t layer_key,
                              int64_t first_sample, uint32_t threshold, float scale) {
  const int64_t total = rows * cols;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (GroupCursor at(i, stride, cols, rows); i < total; i += stride, at.advance()) {
    const uint64_t row_key = dropout_mask::rowKey(layer_key, first_sample + at.group);
    out[i] = dropout_mask::keep(row_key, at.pos, threshold) ? in[i] * scale : 0.0f;
  }
}

void apply(const float* in, float* out, int64_t rows, int64_t cols, float rate, const ops::DropoutKey& key,
           cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  dropoutKernel<<<gridStrideBlocks(rows * cols), kElementwiseThreads, 0, stream>>>(
      in, out, rows, cols, dropout_mask::layerKey(key.seed, key.layer), key.first_sample,
      dropout_mask::dropThreshold(rate), dropout_mask::keptScale(rate));
}

}  // namespace

void dropoutForward(const float* x, float* y, int64_t rows, int64_t cols, float rate,
                    const ops::DropoutKey& key, cudaStream_t stream) {
  apply(x, y, rows, cols, rate, key, stream);
}

void dropoutBackward(const float* dy, float* dx, int64_t rows, int64_t cols, float rate,
                     const ops::DropoutKey& key, cudaStream_t stream) {
  apply(dy, dx, rows, cols, rate, key, stream);
}

}  // namespace dtrain::cuda
