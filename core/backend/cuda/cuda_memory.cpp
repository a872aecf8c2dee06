#include "core/backend/cuda/cuda_memory.h"

#include <cstdio>
#include <string>

#include "core/backend/cuda/cuda_check.h"

namespace dtrain {

namespace {

// Each call runs on whatever device the calling thread has current: make it ours.
void useDevice(int device) { checkCuda(cudaSetDevice(device), "select the device"); }

}  // namespace

RawAllocator cudaRawAllocator(int device) {
  RawAllocator raw;
  raw.device = "cuda:" + std::to_string(device);
  raw.allocate = [device](size_t bytes) -> void* {
    useDevice(device);
    void* p = nullptr;
    // While the stream records a graph, cudaMalloc is a call the capture
    // refuses (it is not queued on the stream). Here it is safe: the caching
    // allocator keeps every block the recording touches for the graph
    // (CachingAllocator::beginRecording), so the thread allows it just for
    // this call.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    const cudaError_t status = cudaMalloc(&p, bytes);
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it: the cache retries after freeing
      return nullptr;
    }
    checkCuda(status, "allocate device memory");
    return p;
  };
  raw.free = [device](void* p) {
    useDevice(device);
    cudaFree(p);  // at teardown a failing device must not throw from here
  };
  raw.free_bytes = [device]() -> std::string {
    size_t free = 0, total = 0;
    if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) return "";
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.2f GiB free of %.2f GiB on the device", free / 1073741824.0,
                  total / 1073741824.0);
    return buf;
  };
  return raw;
}

}  // namespace dtrain
