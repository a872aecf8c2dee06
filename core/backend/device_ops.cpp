#include "core/backend/device_ops.h"

#include "core/backend/cuda_module.h"

namespace dtrain::device_ops {

void sgdUpdate(Device device, float* params, const float* grads, float* momentum_buf, int64_t n, double lr,
               double momentum, bool nesterov, double weight_decay, const HalfCopy& half) {
  cudaBackend(device).sgdUpdate(device.index, params, grads, momentum_buf, n, lr, momentum, nesterov,
                                weight_decay, half);
}

void adamUpdate(Device device, float* params, const float* grads, float* m, float* v, int64_t n, double lr,
                double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step,
                const HalfCopy& half) {
  cudaBackend(device).adamUpdate(device.index, params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
                                 decoupled, step, half);
}

void sgdUpdateFromDevice(Device device, float* params, const float* grads, float* momentum_buf, int64_t n,
                         bool momentum, bool nesterov, const StepScalars* scalars, const HalfCopy& half) {
  cudaBackend(device).sgdUpdateFromDevice(device.index, params, grads, momentum_buf, n, momentum, nesterov,
                                          scalars, half);
}

void adamUpdateFromDevice(Device device, float* params, const float* grads, float* m, float* v, int64_t n,
                          const StepScalars* scalars, const HalfCopy& half) {
  cudaBackend(device).adamUpdateFromDevice(device.index, params, grads, m, v, n, scalars, half);
}

void setTf32(Device device, bool allow) { cudaBackend(device).setTf32(device.index, allow); }

void scale(Device device, float* x, int64_t n, float s) { cudaBackend(device).scale(device.index, x, n, s); }

double sumOfSquares(Device device, const float* x, int64_t n) {
  return cudaBackend(device).sumOfSquares(device.index, x, n);
}

void clipByNorm(Device device, float* x, int64_t n, double max_norm) {
  cudaBackend(device).clipByNorm(device.index, x, n, max_norm);
}

}  // namespace dtrain::device_ops
