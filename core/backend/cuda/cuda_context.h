// Everything one process needs to compute on one GPU: the compute stream that
// every kernel, copy and library call of training is queued on, the caching
// allocator behind device tensors, the cuBLAS and cuDNN handles bound to that
// stream, and a workspace for library calls. One per device, made on first
// use and kept for the life of the process (never destroyed: device tensors
// may outlive any scope, and the CUDA runtime is torn down at exit anyway).
//
// Because all work of a device goes through one stream, memory released to
// the caching allocator may be handed out again at once: the next user's
// work is queued behind the last use. Work on other streams (collectives)
// must wait for an event recorded on this stream before touching its memory.
//
// Threading: of() may be called from any thread (it also makes the device
// current for that thread); the handles are used by one compute thread.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <mutex>

#include "core/backend/caching_allocator.h"
#include "core/backend/cuda/cublas_gemm.h"
#include "core/backend/cuda/cublaslt_gemm.h"
#include "core/backend/cuda/cuda_handles.h"
#include "core/backend/cuda/library_memory.h"

namespace dtrain {

class CudnnHandle;

class CudaContext {
 public:
  // The context of CUDA device `device`; throws DeviceError when there is no
  // such device.
  static CudaContext& of(int device);

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_.get(); }
  const CublasHandle& cublas() const { return *cublas_; }
  cublasLtHandle_t cublasLt() const { return cublas_lt_->get(); }
  cudnnHandle_t cudnn() const;

  // TF32 tensor-core math for matrix products and convolutions (off by
  // default: fp32 results then match the CPU within rounding).
  void setTf32(bool allow);
  bool tf32() const { return tf32_; }

  // Device memory from the caching allocator, released to it with the last owner.
  std::shared_ptr<void> allocate(size_t bytes);
  // Device memory from the allocator, or null when even after emptying its
  // cache it cannot give `bytes` (an algorithm search then asks for less).
  std::shared_ptr<void> tryAllocate(size_t bytes);
  // A workspace of at least `bytes` for library calls on the stream; valid
  // until the next call (grown, never shrunk).
  void* workspace(size_t bytes);
  // workspace() and tryAllocate() as the library wrappers take them.
  LibraryMemory libraryMemory();
  CachingAllocatorStats memoryStats() const { return allocator_.stats(); }
  // For recording the stream's work as a graph (cuda_step_graph.h).
  CachingAllocator& allocator() { return allocator_; }

  // Queued on the stream; a copy into host memory waits until it has arrived.
  void copy(void* dst, const void* src, size_t bytes, bool to_host);
  void fill(float* p, int64_t n, float value);
  void add(float* dst, const float* src, int64_t n);
  void synchronize() const { stream_.synchronize(); }

 private:
  explicit CudaContext(int device);

  int device_;
  CudaStream stream_;
  CachingAllocator allocator_;
  std::shared_ptr<void> cublas_workspace_;  // before cublas_, which uses it
  std::unique_ptr<CublasHandle> cublas_;
  std::unique_ptr<CublasLtHandle> cublas_lt_;
  std::unique_ptr<CudnnHandle> cudnn_;
  bool tf32_ = false;
  std::shared_ptr<void> workspace_;
  size_t workspace_bytes_ = 0;
};

// Page-locked host memory (cudaHostAlloc), or null when no GPU is visible.
std::shared_ptr<void> cudaPinnedHost(size_t bytes);

}  // namespace dtrain
