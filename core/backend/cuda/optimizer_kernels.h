// Fused optimizer updates on the GPU: one pass over params, grads and state,
// with exactly the CPU optimizers' formulas and float precision (the element
// rules and the step scalars are core/optim/update_rules.h, shared with
// core/optim/sgd.cpp and adam.cpp). Queued on `stream`, never synchronising;
// device pointers of n floats each, in the flat parameter layout. Each takes
// a HalfCopy: when it has data, the update also stores every new parameter
// rounded to its 16-bit dtype there (the fused cast-and-update of a 16-bit
// precision), saving the forward's separate read of the masters.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/backend/half_copy.h"
#include "core/backend/step_scalars.h"

namespace dtrain::cuda {

// torch.optim.SGD semantics as core/optim/sgd.h. momentum_buf (zeroed before
// the first step) may be null when momentum == 0, and must not be otherwise
// (throws Error). nesterov without momentum is the plain update, as on the CPU.
void sgdUpdate(float* params, const float* grads, float* momentum_buf, int64_t n, double lr, double momentum,
               bool nesterov, double weight_decay, cudaStream_t stream, const HalfCopy& half = {});

// Adam, or AdamW when `decoupled`, as core/optim/adam.h; m and v zeroed before
// the first step. Throws Error for step < 1 (it drives the bias corrections).
void adamUpdate(float* params, const float* grads, float* m, float* v, int64_t n, double lr, double beta1,
                double beta2, double eps, double weight_decay, bool decoupled, int64_t step,
                cudaStream_t stream, const HalfCopy& half = {});

// The same two updates with their scalars read from device memory
// (StepScalars::optimizer: an update_rules::SgdScalars or AdamScalars), so a
// recorded step replays with each step's learning rate and bias corrections.
// `momentum` says whether momentum_buf is used (the CPU's momentum != 0).
void sgdUpdateFromDevice(float* params, const float* grads, float* momentum_buf, int64_t n, bool momentum,
                         bool nesterov, const StepScalars* scalars, cudaStream_t stream,
                         const HalfCopy& half = {});
void adamUpdateFromDevice(float* params, const float* grads, float* m, float* v, int64_t n,
                          const StepScalars* scalars, cudaStream_t stream, const HalfCopy& half = {});

}  // namespace dtrain::cuda
