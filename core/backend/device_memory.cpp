#include "core/backend/device_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/backend/cuda_module.h"

namespace dtrain {

namespace {

constexpr size_t kHugePageBytes = size_t(2) << 20;

}  // namespace

std::shared_ptr<void> allocateHost(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<void>(p, std::free);
}

std::shared_ptr<void> allocateHostHugePages(size_t bytes) {
  if (bytes < kHugePageBytes) {
    std::shared_ptr<void> small = allocateHost(bytes);
    std::memset(small.get(), 0, bytes);
    return small;
  }
  // A mapping of its own, trimmed to a 2 MiB boundary: its pages read as
  // zeros and cost nothing until first written.
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* raw =
      mmap(nullptr, rounded + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + rounded + kHugePageBytes;
  if (end > aligned + rounded) munmap(reinterpret_cast<void*>(aligned + rounded), end - (aligned + rounded));
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, rounded, MADV_HUGEPAGE);  // a hint: refused, the pages are small ones
  return std::shared_ptr<void>(p, [rounded](void* q) { munmap(q, rounded); });
}

std::shared_ptr<void> allocateDeviceMemory(Device device, size_t bytes) {
  return cudaBackend(device).allocate(device.index, bytes);
}

std::shared_ptr<void> allocatePinnedHost(size_t bytes) {
  // Only a run that computes on a GPU has loaded the module; pinning pays
  // only for copies to a GPU, so everyone else gets ordinary memory.
  CudaBackend* cuda = loadedCudaBackend();
  std::shared_ptr<void> pinned = cuda ? cuda->pinnedHost(bytes) : nullptr;
  return pinned ? pinned : allocateHost(bytes);
}

void copyDeviceMemory(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  const Device on = dst_device.isCpu() ? src_device : dst_device;
  if (on.isCpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  cudaBackend(on).copy(on.index, dst, src, bytes, dst_device.isCpu());
}

void fillDeviceMemory(float* p, int64_t n, float value, Device device) {
  cudaBackend(device).fill(device.index, p, n, value);
}

void fillDeviceMemory16(uint16_t* p, int64_t n, uint16_t bits, Device device) {
  cudaBackend(device).fill16(device.index, p, n, bits);
}

void convertDeviceMemory(const void* src, DType from, void* dst, DType to, int64_t n, Device device) {
  cudaBackend(device).convert(device.index, src, from, dst, to, n);
}

void addDeviceMemory16(void* dst, const void* src, DType dtype, int64_t n, Device device) {
  cudaBackend(device).add16(device.index, dst, src, dtype, n);
}

void addDeviceMemory(float* dst, const float* src, int64_t n, Device device) {
  cudaBackend(device).add(device.index, dst, src, n);
}

int64_t peakDeviceMemory(Device device) { return cudaBackend(device).peakMemoryInUse(device.index); }

}  // namespace dtrain
