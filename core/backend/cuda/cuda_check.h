// Every CUDA runtime call's status goes through checkCuda: a failure becomes a
// DeviceError naming the call and CUDA's own words for the error.
#pragma once
#include <cuda_runtime.h>

namespace dtrain {

// Throws DeviceError "CUDA: <what>: <CUDA's error text>" unless `status` is cudaSuccess.
void checkCuda(cudaError_t status, const char* what);

}  // namespace dtrain
