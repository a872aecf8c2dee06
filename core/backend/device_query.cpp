#include "core/backend/device_query.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "core/backend/cuda_module.h"

namespace dtrain {

DeviceError noCudaBackendError(Device device) {
  return DeviceError(
      "device " + device.str() +
      ": this dtrain was built without the CUDA backend; rebuild with the CUDA toolkit, cuBLAS, "
      "cuDNN and NCCL, or use device = \"cpu\"");
}

bool cudaBackendBuilt() {
  // DTRAIN_CUDA_MODULE names a module for a build that made none too (tests).
  const char* env = std::getenv("DTRAIN_CUDA_MODULE");
  return cudaModuleBuilt() || (env && *env);
}

namespace {

// The GPUs are counted through the driver (libcuda), not the runtime the
// module links: asking whether a GPU is there must not load cuDNN and cuBLAS.
// The driver honours CUDA_VISIBLE_DEVICES and numbers devices as the runtime does.
struct Driver {
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  int count = 0;
  NameFn name = nullptr;
  GetFn get = nullptr;
};

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;  // no driver: no GPU, an answer rather than an error
    auto init = reinterpret_cast<Driver::InitFn>(dlsym(lib, "cuInit"));
    auto count = reinterpret_cast<Driver::CountFn>(dlsym(lib, "cuDeviceGetCount"));
    d.get = reinterpret_cast<Driver::GetFn>(dlsym(lib, "cuDeviceGet"));
    d.name = reinterpret_cast<Driver::NameFn>(dlsym(lib, "cuDeviceGetName"));
    int n = 0;
    if (init && count && init(0) == 0 && count(&n) == 0) d.count = n;
  });
  return d;
}

}  // namespace

int visibleCudaDevices() { return cudaBackendBuilt() ? driver().count : 0; }

std::string cudaDeviceName(int index) {
  const Driver& d = driver();
  if (index < 0 || index >= d.count || !d.get || !d.name) return "";
  int dev = 0;
  char name[256] = {};
  if (d.get(&dev, index) != 0 || d.name(name, sizeof name, dev) != 0) return "";
  return name;
}

}  // namespace dtrain
