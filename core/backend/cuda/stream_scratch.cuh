// Device memory for one call's intermediate results (a reduction's per-block
// partial sums), taken from CUDA's stream-ordered allocator: allocation and
// release are queued on the stream like kernels, so neither synchronises, and
// the release takes effect only after the kernels queued before it are done.
// Used only by the backend's .cu files; kernels that fit in one pass need none.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "core/errors.h"

namespace dtrain::cuda {

class StreamScratch {
 public:
  // Throws DeviceError naming `what` when the memory cannot be had.
  StreamScratch(size_t bytes, cudaStream_t stream, const char* what) : stream_(stream) {
    const cudaError_t status = cudaMallocAsync(&data_, bytes, stream);
    if (status != cudaSuccess) {
      data_ = nullptr;
      throw DeviceError(std::string("CUDA: scratch memory for ") + what + " (" + std::to_string(bytes) +
                        " bytes): " + cudaGetErrorString(status));
    }
  }
  ~StreamScratch() {
    if (data_) cudaFreeAsync(data_, stream_);  // an error here means the device is failing; nothing to add
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace dtrain::cuda
