// Loads the CUDA backend module (libdtrain_cuda.so) the first time a job asks
// for a GPU. The module links cudart, cuBLAS, cuDNN and NCCL; dtrain itself
// links none of them, so `dtrain --version`, `check` and CPU runs start
// without mapping a gigabyte of CUDA libraries, and the same binary starts on
// a host that has no CUDA libraries at all.
//
// The module is looked for beside the running binary, or where the
// environment variable DTRAIN_CUDA_MODULE points. Its own undefined symbols
// (the engine: tensors, layers, errors) resolve against the binary, which
// exports them.
#pragma once
#include <string>

#include "core/backend/cuda_backend.h"
#include "core/tensor/tensor.h"

namespace dtrain {

// True when this build produced the module (CMake found the CUDA toolkit,
// cuBLAS, cuDNN and NCCL).
bool cudaModuleBuilt();
// The module's path: DTRAIN_CUDA_MODULE, or libdtrain_cuda.so beside the binary.
std::string cudaModulePath();

// The backend, loading the module on first use. Throws DeviceError naming
// `device` and, when the module cannot be loaded, the library it lacks (or
// the module itself) and what to do.
CudaBackend& cudaBackend(Device device);
// The backend when the module is already loaded, else null (never loads it).
CudaBackend* loadedCudaBackend();
// The address of the module's C function `name`, loading the module on first
// use; throws DeviceError like cudaBackend.
void* cudaModuleEntry(const char* name, Device device);

// The one-line reason a module failed to load, from dlerror()'s text:
// names a missing shared library, or an engine symbol the module expects and
// this binary lacks (a module from another build). Exposed for the tests.
std::string describeModuleLoadFailure(const std::string& module_path, const std::string& dl_error);

}  // namespace dtrain
