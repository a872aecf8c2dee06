// The cuDNN handle, bound to one stream, and the status check every cuDNN
// call goes through: a failure becomes a DeviceError naming the call.
//
// Ownership and threading: a handle is used by one thread at a time (cuDNN's
// rule); the work it queues runs in order on its stream.
#pragma once
#include <cuda_runtime.h>
#include <cudnn.h>

namespace dtrain {

// Throws DeviceError "cuDNN: <what>: <cuDNN's error text>" unless `status` is CUDNN_STATUS_SUCCESS.
void checkCudnn(cudnnStatus_t status, const char* what);

class CudnnHandle {
 public:
  explicit CudnnHandle(cudaStream_t stream);
  ~CudnnHandle();  // errors at destruction are ignored: the device may be failing
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;

  cudnnHandle_t get() const { return handle_; }

 private:
  cudnnHandle_t handle_ = nullptr;
};

}  // namespace dtrain
