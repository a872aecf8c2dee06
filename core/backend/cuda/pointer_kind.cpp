#include "core/backend/cuda/pointer_kind.h"

#include <cuda_runtime.h>

#include "core/backend/cuda/cuda_check.h"

namespace dtrain {

PointerKind pointerKind(const void* pointer) {
  cudaPointerAttributes attributes{};
  const cudaError_t status = cudaPointerGetAttributes(&attributes, pointer);
  if (status != cudaSuccess) {
    // Runtimes before CUDA 11 answer "invalid value" for memory they do not
    // know and keep it as the thread's last error, where a later check of an
    // unrelated call would find it.
    cudaGetLastError();
    if (status == cudaErrorInvalidValue) return {};
    checkCuda(status, "ask where a buffer lives");
  }
  switch (attributes.type) {
    case cudaMemoryTypeDevice:
      return {true, attributes.device};
    case cudaMemoryTypeManaged:
      return {true, -1};
    default:  // cudaMemoryTypeUnregistered (pageable) or cudaMemoryTypeHost (pinned)
      return {};
  }
}

}  // namespace dtrain
