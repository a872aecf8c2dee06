#include "core/backend/cuda/byte_batch_kernels.h"
#include "core/backend/cuda/launch_shape.h"

namespace dtrain::cuda {

namespace {

// One output float per thread, grid-stride: neighbouring threads write
// neighbouring floats, and read neighbouring bytes of one row (mirrored
// rows read them backwards, within the same cache lines).
__global__ void byteBatchKernel(const uint8_t* pixels, const SampleTransform* transforms, int64_t total,
                                ByteBatchLayout layout, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = byteBatchValue(pixels, transforms, layout, i);
}

}  // namespace

void byteBatchToFloats(const uint8_t* pixels, const SampleTransform* transforms, int64_t n,
                       const ByteBatchLayout& layout, float* out, cudaStream_t stream) {
  const int64_t total = n * layout.sampleBytes();
  if (total <= 0) return;
  byteBatchKernel<<<gridStrideBlocks(total), kElementwiseThreads, 0, stream>>>(pixels, transforms, total,
                                                                               layout, out);
}

}  // namespace dtrain::cuda
