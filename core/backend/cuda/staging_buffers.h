// Scratch memory the GPU process groups copy buffers through: device memory
// (NCCL's side of a host buffer) and pinned host memory (Gloo's side of a
// device buffer). Each grows to the largest request seen, never shrinks, and
// is freed with its owner.
//
// Growing frees the old block first: callers grow only when no queued work
// still uses it (every collective waits for its own work before it returns).
#pragma once
#include <cstddef>

namespace dtrain {

class DeviceStagingBuffer {
 public:
  DeviceStagingBuffer() = default;
  ~DeviceStagingBuffer();
  DeviceStagingBuffer(const DeviceStagingBuffer&) = delete;
  DeviceStagingBuffer& operator=(const DeviceStagingBuffer&) = delete;

  // At least `bytes` of memory on the calling thread's current device; the
  // contents are not kept across a call that grows it. Throws DeviceError.
  void* reserve(size_t bytes);

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  ~PinnedHostBuffer();
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  // At least `bytes` of page-locked host memory (copies to and from it run
  // asynchronously at full speed); the contents are not kept across a call
  // that grows it. Throws DeviceError.
  void* reserve(size_t bytes);

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace dtrain
