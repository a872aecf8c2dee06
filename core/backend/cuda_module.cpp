#include "core/backend/cuda_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <mutex>

#include "core/backend/device_query.h"
#include "core/errors.h"

namespace dtrain {

namespace {

std::string binaryFolder() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

struct LoadedModule {
  void* handle = nullptr;
  CudaBackend* backend = nullptr;
  std::string error;  // why it could not be loaded; empty when loaded
};

std::mutex& moduleMutex() {
  static std::mutex m;
  return m;
}
LoadedModule*& loadedModule() {
  static LoadedModule* m = nullptr;
  return m;
}

// Loads once; a failure is remembered, so every later ask gets the same line.
LoadedModule& loadModule() {
  std::lock_guard<std::mutex> lock(moduleMutex());
  if (loadedModule()) return *loadedModule();
  auto* m = new LoadedModule;  // kept for the life of the process, as the module is
  const std::string path = cudaModulePath();
  // RTLD_GLOBAL is not needed: the module's parts find each other inside it,
  // and the engine finds them through dlsym on this handle.
  m->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!m->handle) {
    const char* err = dlerror();
    m->error = describeModuleLoadFailure(path, err ? err : "unknown dlopen error");
  } else {
    using Entry = CudaBackend* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(m->handle, kCudaBackendEntry));
    if (!entry)
      m->error = "the CUDA backend module " + path + " lacks " + kCudaBackendEntry +
                 ": it is from another dtrain version; rebuild dtrain, or use device = \"cpu\"";
    else
      m->backend = entry();
  }
  loadedModule() = m;
  return *m;
}

DeviceError unavailable(Device device, const std::string& why) {
  return DeviceError("device " + device.str() + ": " + why);
}

}  // namespace

bool cudaModuleBuilt() {
#if defined(DTRAIN_CUDA_MODULE_BUILT)
  return true;
#else
  return false;
#endif
}

std::string cudaModulePath() {
  if (const char* env = std::getenv("DTRAIN_CUDA_MODULE"); env && *env) return env;
  return binaryFolder() + "/libdtrain_cuda.so";
}

std::string describeModuleLoadFailure(const std::string& module_path, const std::string& dl_error) {
  // dlerror() says "<file>: cannot open shared object file: ..." for a file
  // it cannot find, whether the module itself or a library it needs, and
  // "<module>: undefined symbol: <name>" for a symbol nothing provides.
  const std::string cannot_open = ": cannot open shared object file";
  if (size_t at = dl_error.find(cannot_open); at != std::string::npos) {
    const std::string file = dl_error.substr(0, at);
    if (file == module_path)
      return "the CUDA backend module " + module_path +
             " is missing (it is built beside the dtrain binary when CMake finds the CUDA toolkit, cuBLAS, "
             "cuDNN and NCCL); rebuild with them, set DTRAIN_CUDA_MODULE to the module, or use device = \"cpu\"";
    return "the CUDA backend needs " + file +
           ", which this host lacks: install it (the CUDA toolkit, cuDNN or NCCL) or add its folder to "
           "LD_LIBRARY_PATH, or use device = \"cpu\"";
  }
  const std::string undefined = "undefined symbol: ";
  if (size_t at = dl_error.find(undefined); at != std::string::npos)
    return "the CUDA backend module " + module_path + " does not match this dtrain binary (" +
           dl_error.substr(at) + "); rebuild dtrain, or use device = \"cpu\"";
  return "cannot load the CUDA backend module " + module_path + " (" + dl_error +
         "); rebuild dtrain, or use device = \"cpu\"";
}

CudaBackend& cudaBackend(Device device) {
  if (!cudaBackendBuilt()) throw noCudaBackendError(device);
  LoadedModule& m = loadModule();
  if (!m.backend) throw unavailable(device, m.error);
  return *m.backend;
}

CudaBackend* loadedCudaBackend() {
  std::lock_guard<std::mutex> lock(moduleMutex());
  LoadedModule* m = loadedModule();
  return m ? m->backend : nullptr;
}

void* cudaModuleEntry(const char* name, Device device) {
  cudaBackend(device);  // loads, or throws naming what is missing
  void* entry = dlsym(loadedModule()->handle, name);
  if (!entry)
    throw unavailable(device, "the CUDA backend module " + cudaModulePath() + " lacks " + name +
                                  ": it is from another dtrain version; rebuild dtrain, or use device = \"cpu\"");
  return entry;
}

}  // namespace dtrain
