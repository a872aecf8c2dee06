#include "core/backend/device_ops.h"

#include "core/backend/device_query.h"
#include "core/errors.h"

#if defined(DTRAIN_HAVE_CUDA)
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_context.h"
#include "core/backend/cuda/elementwise_kernels.h"
#include "core/backend/cuda/optimizer_kernels.h"
#endif

namespace dtrain::device_ops {

#if defined(DTRAIN_HAVE_CUDA)

namespace {

cudaStream_t streamOf(Device device) { return CudaContext::of(device.index).stream(); }

void launched(const char* what) { checkCuda(cudaGetLastError(), what); }

}  // namespace

void sgdUpdate(Device device, float* params, const float* grads, float* momentum_buf, int64_t n, double lr,
               double momentum, bool nesterov, double weight_decay) {
  cuda::sgdUpdate(params, grads, momentum_buf, n, lr, momentum, nesterov, weight_decay, streamOf(device));
  launched("launch the SGD update");
}

void adamUpdate(Device device, float* params, const float* grads, float* m, float* v, int64_t n, double lr,
                double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step) {
  cuda::adamUpdate(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, decoupled, step,
                   streamOf(device));
  launched("launch the Adam update");
}

void setTf32(Device device, bool allow) { CudaContext::of(device.index).setTf32(allow); }

void scale(Device device, float* x, int64_t n, float s) {
  cuda::scale(x, n, s, streamOf(device));
  launched("launch a scale");
}

double sumOfSquares(Device device, const float* x, int64_t n) {
  CudaContext& ctx = CudaContext::of(device.index);
  std::shared_ptr<void> sum = ctx.allocate(sizeof(double));
  cuda::sumOfSquares(x, n, static_cast<double*>(sum.get()), ctx.stream());
  launched("launch a sum of squares");
  double out = 0;
  ctx.copy(&out, sum.get(), sizeof out, true);
  return out;
}

#else

void sgdUpdate(Device device, float*, const float*, float*, int64_t, double, double, bool, double) {
  throw noCudaBackendError(device);
}
void adamUpdate(Device device, float*, const float*, float*, float*, int64_t, double, double, double, double,
                double, bool, int64_t) {
  throw noCudaBackendError(device);
}
void setTf32(Device device, bool) { throw noCudaBackendError(device); }
void scale(Device device, float*, int64_t, float) { throw noCudaBackendError(device); }
double sumOfSquares(Device device, const float*, int64_t) { throw noCudaBackendError(device); }

#endif

}  // namespace dtrain::device_ops
