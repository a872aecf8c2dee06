// What the CUDA backend module offers the engine below the layers: device
// memory, the whole-buffer operations of the optimizers and the loop, and the
// device loss. The module (libdtrain_cuda.so, core/backend/cuda/) implements
// it; core/backend/cuda_module.h loads the module when a job asks for a GPU,
// so a CPU run never maps the CUDA libraries. The layers (core/nn/cuda/) and
// the GPU process groups (core/comm/cuda/) are reached through entry points of
// their own (cudaModuleEntry), so each part of the module sits beside the
// engine part it extends and the dependencies keep pointing down.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/backend/batch_stager.h"
#include "core/backend/device_loss.h"
#include "core/backend/half_copy.h"
#include "core/backend/span_clock.h"
#include "core/backend/step_graph.h"
#include "core/backend/step_scalars.h"
#include "core/tensor/tensor.h"

namespace dtrain {

class CudaBackend {
 public:
  virtual ~CudaBackend() = default;

  // core/backend/device_memory.h's meaning, on CUDA device `device`.
  virtual std::shared_ptr<void> allocate(int device, size_t bytes) = 0;
  // Page-locked host memory, or null when no GPU is visible.
  virtual std::shared_ptr<void> pinnedHost(size_t bytes) = 0;
  virtual void copy(int device, void* dst, const void* src, size_t bytes, bool to_host) = 0;
  virtual void fill(int device, float* p, int64_t n, float value) = 0;
  virtual void add(int device, float* dst, const float* src, int64_t n) = 0;
  virtual void fill16(int device, uint16_t* p, int64_t n, uint16_t bits) = 0;
  virtual void convert(int device, const void* src, DType from, void* dst, DType to, int64_t n) = 0;
  virtual void add16(int device, void* dst, const void* src, DType dtype, int64_t n) = 0;

  // core/backend/device_ops.h's meaning.
  virtual void sgdUpdate(int device, float* params, const float* grads, float* momentum_buf, int64_t n,
                         double lr, double momentum, bool nesterov, double weight_decay,
                         const HalfCopy& half) = 0;
  virtual void adamUpdate(int device, float* params, const float* grads, float* m, float* v, int64_t n,
                          double lr, double beta1, double beta2, double eps, double weight_decay,
                          bool decoupled, int64_t step, const HalfCopy& half) = 0;
  virtual void sgdUpdateFromDevice(int device, float* params, const float* grads, float* momentum_buf,
                                   int64_t n, bool momentum, bool nesterov, const StepScalars* scalars,
                                   const HalfCopy& half) = 0;
  virtual void adamUpdateFromDevice(int device, float* params, const float* grads, float* m, float* v,
                                    int64_t n, const StepScalars* scalars, const HalfCopy& half) = 0;
  virtual void setTf32(int device, bool allow) = 0;
  virtual void scale(int device, float* x, int64_t n, float s) = 0;
  virtual double sumOfSquares(int device, const float* x, int64_t n) = 0;
  virtual void clipByNorm(int device, float* x, int64_t n, double max_norm) = 0;

  virtual std::unique_ptr<DeviceLoss> makeLoss(int device, int64_t classes, int64_t width) = 0;
  // Spans timed by events on the device's compute stream.
  virtual std::unique_ptr<SpanClock> spanClock(int device) = 0;
  virtual std::unique_ptr<BatchStager> batchStager(int device, int64_t max_image_floats,
                                                   int64_t max_labels) = 0;
  // core/backend/step_scalars.h and step_graph.h: starts recording the
  // device's compute stream (throws DeviceError when it cannot).
  virtual std::unique_ptr<StepScalarsBuffer> stepScalars(int device) = 0;
  virtual std::unique_ptr<StepRecording> recordStep(int device) = 0;
  // core/backend/device_memory.h's peakDeviceMemory: the caching allocator's
  // held peak (CachingAllocatorStats::peak_held_bytes), its span restarted.
  virtual int64_t peakMemoryInUse(int device) = 0;
};

// The module's entry points, by name; each is a C function so dlsym finds it
// unmangled. `_v1` changes when a signature does, so a stale module is named
// as such instead of being called wrongly.
inline constexpr const char* kCudaBackendEntry = "dtrain_cuda_backend_v3";  // CudaBackend* ()

}  // namespace dtrain
