#include "core/backend/device_query.h"

#if defined(DTRAIN_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

namespace dtrain {

DeviceError noCudaBackendError(Device device) {
  return DeviceError(
      "device " + device.str() +
      ": this dtrain was built without the CUDA backend; rebuild with the CUDA toolkit, cuBLAS, "
      "cuDNN and NCCL, or use device = \"cpu\"");
}

#if defined(DTRAIN_HAVE_CUDA)

bool cudaBackendBuilt() { return true; }

int visibleCudaDevices() {
  int count = 0;
  // No driver or no GPU is an answer here, not an error.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::string cudaDeviceName(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return prop.name;
}

#else

bool cudaBackendBuilt() { return false; }
int visibleCudaDevices() { return 0; }
std::string cudaDeviceName(int) { return ""; }

#endif

}  // namespace dtrain
