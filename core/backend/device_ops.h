// The few whole-buffer operations the training loop and the optimizers run on
// a GPU's flat parameter and gradient buffers, asked the same way with or
// without the CUDA backend (without it they throw DeviceError). Queued on the
// device's compute stream unless they return a value.
#pragma once
#include <cstdint>

#include "core/tensor/tensor.h"

namespace dtrain::device_ops {

// torch.optim.SGD's update (see core/optim/sgd.h); momentum_buf null without momentum.
void sgdUpdate(Device device, float* params, const float* grads, float* momentum_buf, int64_t n, double lr,
               double momentum, bool nesterov, double weight_decay);
// Adam / AdamW (see core/optim/adam.h).
void adamUpdate(Device device, float* params, const float* grads, float* m, float* v, int64_t n, double lr,
                double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step);
// TF32 tensor-core math for the device's matrix products and convolutions
// (precision = "tf32"); off by default.
void setTf32(Device device, bool allow);
// x *= s.
void scale(Device device, float* x, int64_t n, float s);
// The sum of x[i]^2 (waits for the device).
double sumOfSquares(Device device, const float* x, int64_t n);

}  // namespace dtrain::device_ops
