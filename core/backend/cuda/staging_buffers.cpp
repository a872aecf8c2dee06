#include "core/backend/cuda/staging_buffers.h"

#include <cuda_runtime.h>

#include "core/backend/cuda/cuda_check.h"

namespace dtrain {

DeviceStagingBuffer::~DeviceStagingBuffer() {
  if (data_) cudaFree(data_);  // at teardown a failing device must not throw from here
}

void* DeviceStagingBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_ && data_) return data_;
  if (data_) cudaFree(data_);
  data_ = nullptr;
  capacity_ = 0;
  void* grown = nullptr;
  checkCuda(cudaMalloc(&grown, bytes == 0 ? 1 : bytes), "allocate a device staging buffer");
  data_ = grown;
  capacity_ = bytes;
  return data_;
}

PinnedHostBuffer::~PinnedHostBuffer() {
  if (data_) cudaFreeHost(data_);
}

void* PinnedHostBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_ && data_) return data_;
  if (data_) cudaFreeHost(data_);
  data_ = nullptr;
  capacity_ = 0;
  void* grown = nullptr;
  checkCuda(cudaHostAlloc(&grown, bytes == 0 ? 1 : bytes, cudaHostAllocDefault),
            "allocate a pinned host staging buffer");
  data_ = grown;
  capacity_ = bytes;
  return data_;
}

}  // namespace dtrain
