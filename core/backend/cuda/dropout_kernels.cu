// One thread per element (grid-stride), each recomputing its row's key: a
// splitmix64 and two 32-bit mixes cost less than the element's memory traffic.
#include "core/backend/cuda/dropout_kernels.h"
#include "core/backend/cuda/group_cursor.h"
#include "core/backend/cuda/half_io.cuh"
#include "core/backend/cuda/launch_shape.h"
#include "core/backend/dropout_mask.h"
#include "core/backend/step_scalars.h"

namespace dtrain::cuda {

namespace {

// Where a kernel takes its row keys from: the call's seed and first sample,
// or a recorded step's, read from device memory at run time.
struct KeyByValue {
  uint64_t layer_key;
  int64_t first_sample;
  __device__ void get(uint64_t& key, int64_t& first) const {
    key = layer_key;
    first = first_sample;
  }
};

struct KeyFromDevice {
  const StepScalars* step;
  int64_t layer;
  __device__ void get(uint64_t& key, int64_t& first) const {
    key = dropout_mask::layerKey(step->seed, layer);
    first = step->sample_offset;
  }
};

// out[r, e] = keep(r, e) ? in[r, e] * scale : 0, the product in float; the
// row of element i is tracked as the "group" of a [1, rows, cols] layout.
template <typename T, typename KeySource>
__global__ void dropoutKernel(const T* in, T* out, int64_t rows, int64_t cols, KeySource source,
                              uint32_t threshold, float scale) {
  uint64_t layer_key;
  int64_t first_sample;
  source.get(layer_key, first_sample);
  const int64_t total = rows * cols;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (GroupCursor at(i, stride, cols, rows); i < total; i += stride, at.advance()) {
    const uint64_t row_key = dropout_mask::rowKey(layer_key, first_sample + at.group);
    out[i] = fromFloat<T>(dropout_mask::keep(row_key, at.pos, threshold) ? toFloat(in[i]) * scale : 0.0f);
  }
}

void apply(const void* in, void* out, DType dtype, int64_t rows, int64_t cols, float rate,
           const ops::DropoutKey& key, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const unsigned blocks = gridStrideBlocks(rows * cols);
  const uint32_t threshold = dropout_mask::dropThreshold(rate);
  const float scale = dropout_mask::keptScale(rate);
  withElementType(dtype, [&](auto e) {
    using T = decltype(e);
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    if (key.on_device)
      dropoutKernel<<<blocks, kElementwiseThreads, 0, stream>>>(
          x, y, rows, cols, KeyFromDevice{key.on_device, key.layer}, threshold, scale);
    else
      dropoutKernel<<<blocks, kElementwiseThreads, 0, stream>>>(
          x, y, rows, cols, KeyByValue{dropout_mask::layerKey(key.seed, key.layer), key.first_sample},
          threshold, scale);
  });
}

}  // namespace

void dropoutForward(const float* x, float* y, int64_t rows, int64_t cols, float rate,
                    const ops::DropoutKey& key, cudaStream_t stream) {
  apply(x, y, DType::F32, rows, cols, rate, key, stream);
}

void dropoutBackward(const float* dy, float* dx, int64_t rows, int64_t cols, float rate,
                     const ops::DropoutKey& key, cudaStream_t stream) {
  apply(dy, dx, DType::F32, rows, cols, rate, key, stream);
}

void dropoutForward(const void* x, void* y, DType dtype, int64_t rows, int64_t cols, float rate,
                    const ops::DropoutKey& key, cudaStream_t stream) {
  apply(x, y, dtype, rows, cols, rate, key, stream);
}

void dropoutBackward(const void* dy, void* dx, DType dtype, int64_t rows, int64_t cols, float rate,
                     const ops::DropoutKey& key, cudaStream_t stream) {
  apply(dy, dx, dtype, rows, cols, rate, key, stream);
}

}  // namespace dtrain::cuda
