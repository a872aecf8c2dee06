// The kernel turning a byte batch into the float batch on the device
// (core/backend/byte_batch.h holds its arithmetic, shared with the CPU).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/backend/byte_batch.h"

namespace dtrain::cuda {

// out[n,C,H,W] from the sources' bytes in `pixels` (device memory: a batch's
// bytes, or the cached training split) and n transforms (device memory);
// layout.mean / layout.std, when set, in device memory too. Queued on `stream`.
void byteBatchToFloats(const uint8_t* pixels, const SampleTransform* transforms, int64_t n,
                       const ByteBatchLayout& layout, float* out, cudaStream_t stream);

}  // namespace dtrain::cuda
