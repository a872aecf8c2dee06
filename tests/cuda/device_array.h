// A typed device buffer for the kernel tests: allocated from a caching
// allocator, filled from or copied back to a host vector on one stream, and
// released when it goes out of scope (the tests use one stream, so a later
// user of the block is ordered after the kernels that used it).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "core/backend/caching_allocator.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_handles.h"

namespace dtrain::testing {

template <typename T>
class DeviceArray {
 public:
  // A copy of `host`.
  DeviceArray(CachingAllocator& memory, const CudaStream& stream, const std::vector<T>& host)
      : DeviceArray(memory, stream, host.size(), false) {
    upload(host);
  }
  // `count` zero bytes' worth of T.
  DeviceArray(CachingAllocator& memory, const CudaStream& stream, size_t count)
      : DeviceArray(memory, stream, count, true) {}
  ~DeviceArray() { memory_.release(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return data_; }

  void upload(const std::vector<T>& host) {
    if (host.empty()) return;
    checkCuda(
        cudaMemcpyAsync(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream_.get()),
        "upload");
  }
  // Waits for the stream, so the copy holds every result queued before.
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (count_ > 0)
      checkCuda(
          cudaMemcpyAsync(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost, stream_.get()),
          "download");
    stream_.synchronize();
    return host;
  }

 private:
  DeviceArray(CachingAllocator& memory, const CudaStream& stream, size_t count, bool zero)
      : memory_(memory), stream_(stream), count_(count) {
    data_ = static_cast<T*>(memory.allocate(count * sizeof(T)));
    if (zero && count > 0) checkCuda(cudaMemsetAsync(data_, 0, count * sizeof(T), stream.get()), "zero");
  }

  CachingAllocator& memory_;
  const CudaStream& stream_;
  size_t count_;
  T* data_ = nullptr;
};

}  // namespace dtrain::testing
