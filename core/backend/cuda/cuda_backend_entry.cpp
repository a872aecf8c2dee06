// The module's CudaBackend (core/backend/cuda_backend.h): the engine's doors
// to device memory, the optimizer updates and the loss, on CudaContext.
#include "core/backend/cuda/clip_kernels.h"
#include "core/backend/cuda/convert_kernels.h"
#include "core/backend/cuda/cuda_batch_stager.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_context.h"
#include "core/backend/cuda/cuda_loss.h"
#include "core/backend/cuda/cuda_step_graph.h"
#include "core/backend/cuda/cuda_step_scalars.h"
#include "core/backend/cuda/elementwise_kernels.h"
#include "core/backend/cuda/event_span_clock.h"
#include "core/backend/cuda/optimizer_kernels.h"
#include "core/backend/cuda_backend.h"

namespace dtrain {

namespace {

void launched(const char* what) { checkCuda(cudaGetLastError(), what); }

class CudaBackendImpl final : public CudaBackend {
 public:
  std::shared_ptr<void> allocate(int device, size_t bytes) override {
    return CudaContext::of(device).allocate(bytes);
  }
  std::shared_ptr<void> pinnedHost(size_t bytes) override { return cudaPinnedHost(bytes); }
  void copy(int device, void* dst, const void* src, size_t bytes, bool to_host) override {
    CudaContext::of(device).copy(dst, src, bytes, to_host);
  }
  void fill(int device, float* p, int64_t n, float value) override {
    CudaContext::of(device).fill(p, n, value);
  }
  void add(int device, float* dst, const float* src, int64_t n) override {
    CudaContext::of(device).add(dst, src, n);
  }
  void fill16(int device, uint16_t* p, int64_t n, uint16_t bits) override {
    cuda::fill16(p, n, bits, CudaContext::of(device).stream());
    launched("launch a 16-bit fill");
  }
  void convert(int device, const void* src, DType from, void* dst, DType to, int64_t n) override {
    cuda::convert(src, from, dst, to, n, CudaContext::of(device).stream());
    launched("launch a conversion between float and 16 bits");
  }
  void add16(int device, void* dst, const void* src, DType dtype, int64_t n) override {
    cuda::add16(dst, src, dtype, n, CudaContext::of(device).stream());
    launched("launch a 16-bit sum");
  }

  void sgdUpdate(int device, float* params, const float* grads, float* momentum_buf, int64_t n, double lr,
                 double momentum, bool nesterov, double weight_decay, const HalfCopy& half) override {
    cuda::sgdUpdate(params, grads, momentum_buf, n, lr, momentum, nesterov, weight_decay,
                    CudaContext::of(device).stream(), half);
    launched("launch the SGD update");
  }
  void adamUpdate(int device, float* params, const float* grads, float* m, float* v, int64_t n, double lr,
                  double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step,
                  const HalfCopy& half) override {
    cuda::adamUpdate(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, decoupled, step,
                     CudaContext::of(device).stream(), half);
    launched("launch the Adam update");
  }
  void sgdUpdateFromDevice(int device, float* params, const float* grads, float* momentum_buf, int64_t n,
                           bool momentum, bool nesterov, const StepScalars* scalars,
                           const HalfCopy& half) override {
    cuda::sgdUpdateFromDevice(params, grads, momentum_buf, n, momentum, nesterov, scalars,
                              CudaContext::of(device).stream(), half);
    launched("launch the SGD update");
  }
  void adamUpdateFromDevice(int device, float* params, const float* grads, float* m, float* v, int64_t n,
                            const StepScalars* scalars, const HalfCopy& half) override {
    cuda::adamUpdateFromDevice(params, grads, m, v, n, scalars, CudaContext::of(device).stream(), half);
    launched("launch the Adam update");
  }
  void setTf32(int device, bool allow) override { CudaContext::of(device).setTf32(allow); }
  void scale(int device, float* x, int64_t n, float s) override {
    cuda::scale(x, n, s, CudaContext::of(device).stream());
    launched("launch a scale");
  }
  double sumOfSquares(int device, const float* x, int64_t n) override {
    CudaContext& ctx = CudaContext::of(device);
    std::shared_ptr<void> sum = ctx.allocate(sizeof(double));
    cuda::sumOfSquares(x, n, static_cast<double*>(sum.get()), ctx.stream());
    launched("launch a sum of squares");
    double out = 0;
    ctx.copy(&out, sum.get(), sizeof out, true);
    return out;
  }

  void clipByNorm(int device, float* x, int64_t n, double max_norm) override {
    cuda::clipByNorm(x, n, max_norm, CudaContext::of(device).stream());
    launched("launch the gradient clipping");
  }

  std::unique_ptr<DeviceLoss> makeLoss(int device, int64_t classes, int64_t width) override {
    return std::make_unique<CudaLoss>(CudaContext::of(device), classes, width);
  }
  std::unique_ptr<SpanClock> spanClock(int device) override {
    return std::make_unique<EventSpanClock>(CudaContext::of(device));
  }
  std::unique_ptr<BatchStager> batchStager(int device, int64_t max_image_floats,
                                           int64_t max_labels) override {
    return std::make_unique<CudaBatchStager>(CudaContext::of(device), max_image_floats, max_labels);
  }
  std::unique_ptr<StepScalarsBuffer> stepScalars(int device) override {
    return std::make_unique<CudaStepScalarsBuffer>(CudaContext::of(device));
  }
  std::unique_ptr<StepRecording> recordStep(int device) override {
    return CudaStepGraph::beginRecording(CudaContext::of(device));
  }
  int64_t peakMemoryInUse(int device) override { return CudaContext::of(device).allocator().restartPeak(); }
};

}  // namespace

}  // namespace dtrain

extern "C" dtrain::CudaBackend* dtrain_cuda_backend_v3() {
  static dtrain::CudaBackendImpl backend;  // lives as long as the module, which is never unloaded
  return &backend;
}
