// The few whole-buffer operations the training loop and the optimizers run on
// a GPU's flat parameter and gradient buffers, asked the same way with or
// without the CUDA backend (without it they throw DeviceError). Queued on the
// device's compute stream unless they return a value.
#pragma once
#include <cstdint>

#include "core/backend/half_copy.h"
#include "core/backend/step_scalars.h"
#include "core/tensor/tensor.h"

namespace dtrain::device_ops {

// torch.optim.SGD's update (see core/optim/sgd.h); momentum_buf null without
// momentum. Each update also writes `half` when it has data (HalfCopy).
void sgdUpdate(Device device, float* params, const float* grads, float* momentum_buf, int64_t n, double lr,
               double momentum, bool nesterov, double weight_decay, const HalfCopy& half = {});
// Adam / AdamW (see core/optim/adam.h).
void adamUpdate(Device device, float* params, const float* grads, float* m, float* v, int64_t n, double lr,
                double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step,
                const HalfCopy& half = {});
// The two updates with their step scalars read from device memory
// (StepScalars::optimizer, as Sgd / Adam::writeStepScalars wrote them).
void sgdUpdateFromDevice(Device device, float* params, const float* grads, float* momentum_buf, int64_t n,
                         bool momentum, bool nesterov, const StepScalars* scalars, const HalfCopy& half = {});
void adamUpdateFromDevice(Device device, float* params, const float* grads, float* m, float* v, int64_t n,
                          const StepScalars* scalars, const HalfCopy& half = {});
// TF32 tensor-core math for the device's matrix products and convolutions
// (precision = "tf32"); off by default.
void setTf32(Device device, bool allow);
// x *= s.
void scale(Device device, float* x, int64_t n, float s);
// The sum of x[i]^2 (waits for the device).
double sumOfSquares(Device device, const float* x, int64_t n);
// x *= the global-norm clipping factor for max_norm (core/optim/clip_rule.h),
// the norm summed and the factor computed on the device: never waits.
void clipByNorm(Device device, float* x, int64_t n, double max_norm);

}  // namespace dtrain::device_ops
