// What compute devices this build and this machine offer, asked the same way
// with or without the CUDA backend compiled in.
#pragma once
#include <string>

#include "core/errors.h"
#include "core/tensor/tensor.h"

namespace dtrain {

// True when this binary was built with the CUDA backend.
bool cudaBackendBuilt();
// CUDA devices this process can use (0 without the backend, a driver or a GPU).
int visibleCudaDevices();
// "NVIDIA H100 80GB HBM3" for device `index`; "" when it cannot be asked.
std::string cudaDeviceName(int index);
// What a build without the CUDA backend throws when asked to use `device`.
DeviceError noCudaBackendError(Device device);

}  // namespace dtrain
