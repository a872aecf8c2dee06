#include "core/backend/cuda/cudnn_handle.h"

#include <string>

#include "core/errors.h"

namespace dtrain {

void checkCudnn(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw DeviceError(std::string("cuDNN: ") + what + ": " + cudnnGetErrorString(status));
}

CudnnHandle::CudnnHandle(cudaStream_t stream) {
  checkCudnn(cudnnCreate(&handle_), "create a handle");
  const cudnnStatus_t bound = cudnnSetStream(handle_, stream);
  if (bound != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(handle_);  // the destructor does not run for a throwing constructor
    handle_ = nullptr;
    checkCudnn(bound, "bind the handle to a stream");
  }
}

CudnnHandle::~CudnnHandle() {
  if (handle_) cudnnDestroy(handle_);
}

}  // namespace dtrain
