#include "core/backend/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/backend/device_query.h"
#include "core/errors.h"

#if defined(DTRAIN_HAVE_CUDA)
#include "core/backend/cuda/cuda_context.h"
#endif

namespace dtrain {

std::shared_ptr<void> allocateHost(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<void>(p, std::free);
}

#if defined(DTRAIN_HAVE_CUDA)

std::shared_ptr<void> allocateDeviceMemory(Device device, size_t bytes) {
  return CudaContext::of(device.index).allocate(bytes);
}

std::shared_ptr<void> allocatePinnedHost(size_t bytes) {
  std::shared_ptr<void> pinned = cudaPinnedHost(bytes);
  return pinned ? pinned : allocateHost(bytes);
}

void copyDeviceMemory(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  const Device on = dst_device.isCpu() ? src_device : dst_device;
  if (on.isCpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  CudaContext::of(on.index).copy(dst, src, bytes, dst_device.isCpu());
}

void fillDeviceMemory(float* p, int64_t n, float value, Device device) {
  CudaContext::of(device.index).fill(p, n, value);
}

void addDeviceMemory(float* dst, const float* src, int64_t n, Device device) {
  CudaContext::of(device.index).add(dst, src, n);
}

#else

std::shared_ptr<void> allocateDeviceMemory(Device device, size_t) { throw noCudaBackendError(device); }
std::shared_ptr<void> allocatePinnedHost(size_t bytes) { return allocateHost(bytes); }
void copyDeviceMemory(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (!dst_device.isCpu()) throw noCudaBackendError(dst_device);
  if (!src_device.isCpu()) throw noCudaBackendError(src_device);
  if (bytes) std::memcpy(dst, src, bytes);
}
void fillDeviceMemory(float*, int64_t, float, Device device) { throw noCudaBackendError(device); }
void addDeviceMemory(float*, const float*, int64_t, Device device) { throw noCudaBackendError(device); }

#endif

}  // namespace dtrain
