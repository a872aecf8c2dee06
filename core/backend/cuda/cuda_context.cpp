#include "core/backend/cuda/cuda_context.h"

#include <map>
#include <string>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_memory.h"
#include "core/backend/cuda/cudnn_handle.h"
#include "core/backend/cuda/fill_kernels.h"
#include "core/backend/device_query.h"
#include "core/errors.h"

namespace dtrain {

namespace {

// cuBLAS's workspace: NVIDIA's recommendation for Hopper, enough for every
// GPU before it.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

// The stream is made for the device current when the context is built.
int selectDevice(int device) {
  const int count = visibleCudaDevices();
  if (device < 0 || device >= count)
    throw DeviceError("device cuda:" + std::to_string(device) + " does not exist: this process sees " +
                      std::to_string(count) +
                      " CUDA device(s); check CUDA_VISIBLE_DEVICES and the number of workers per host");
  checkCuda(cudaSetDevice(device), "select the device");
  return device;
}

}  // namespace

CudaContext::CudaContext(int device)
    : device_(selectDevice(device)),
      stream_(),
      allocator_(cudaRawAllocator(device)),
      cublas_workspace_(allocate(kCublasWorkspaceBytes)),
      cublas_(std::make_unique<CublasHandle>(stream_.get(), false, cublas_workspace_.get(),
                                             kCublasWorkspaceBytes)),
      cublas_lt_(std::make_unique<CublasLtHandle>()),
      cudnn_(std::make_unique<CudnnHandle>(stream_.get())) {}

CudaContext& CudaContext::of(int device) {
  // Contexts are leaked on purpose (see the header); the map only grows.
  static std::mutex mutex;
  static std::map<int, CudaContext*> contexts;
  thread_local int current = -1;
  CudaContext* ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = contexts.find(device);
    if (it == contexts.end()) it = contexts.emplace(device, new CudaContext(device)).first;
    ctx = it->second;
  }
  if (current != device) {
    checkCuda(cudaSetDevice(device), "select the device");
    current = device;
  }
  return *ctx;
}

cudnnHandle_t CudaContext::cudnn() const { return cudnn_->get(); }

void CudaContext::setTf32(bool allow) {
  if (allow == tf32_) return;
  cublas_ =
      std::make_unique<CublasHandle>(stream_.get(), allow, cublas_workspace_.get(), kCublasWorkspaceBytes);
  tf32_ = allow;
}

std::shared_ptr<void> CudaContext::allocate(size_t bytes) {
  void* p = allocator_.allocate(bytes);
  CachingAllocator* allocator = &allocator_;
  return std::shared_ptr<void>(p, [allocator](void* block) { allocator->release(block); });
}

std::shared_ptr<void> CudaContext::tryAllocate(size_t bytes) {
  try {
    return allocate(bytes);
  } catch (const DeviceError&) {  // out of memory, after the cache was emptied and the request retried
    return nullptr;
  }
}

LibraryMemory CudaContext::libraryMemory() {
  return LibraryMemory{[this](size_t bytes) { return workspace(bytes); },
                       [this](size_t bytes) { return tryAllocate(bytes); }};
}

void* CudaContext::workspace(size_t bytes) {
  if (bytes > workspace_bytes_) {
    workspace_.reset();  // back to the cache first, so a larger block can reuse its memory
    workspace_ = allocate(bytes);
    workspace_bytes_ = bytes;
  }
  return workspace_.get();
}

void CudaContext::copy(void* dst, const void* src, size_t bytes, bool to_host) {
  if (bytes == 0) return;
  checkCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_.get()), "copy memory");
  if (to_host) stream_.synchronize();
}

void CudaContext::fill(float* p, int64_t n, float value) {
  cuda::fill(p, n, value, stream_.get());
  checkCuda(cudaGetLastError(), "launch fill");
}

void CudaContext::add(float* dst, const float* src, int64_t n) {
  cuda::axpy(1.0f, src, dst, n, stream_.get());
  checkCuda(cudaGetLastError(), "launch add");
}

std::shared_ptr<void> cudaPinnedHost(size_t bytes) {
  if (visibleCudaDevices() == 0) return nullptr;
  void* p = nullptr;
  // Portable: the loader thread may allocate it before any device is current there.
  if (cudaHostAlloc(&p, bytes == 0 ? 64 : bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;  // the caller falls back to ordinary memory
  }
  return std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); });
}

}  // namespace dtrain
