#include "core/backend/cuda/cuda_check.h"

#include <string>

#include "core/errors.h"

namespace dtrain {

void checkCuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  throw DeviceError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(status));
}

}  // namespace dtrain
