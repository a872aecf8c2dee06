// The CPU passes of the batch_norm layer (core/nn/layers/batch_norm.h) over a
// batch laid out [n, channels, plane]: plane = H*W for [C,H,W] samples (each
// channel's values of a sample are one contiguous plane), or 1 for [C]
// samples (a sample's channels are contiguous; those passes run along rows).
//
// Per-channel sums add into double: a plane's values are summed in float
// lanes over blocks of at most 1024 elements (eight lanes for the forward
// moments, sixteen for the backward sums), each block's sum then added in
// double, so the rounding error stays that of a 128-term float sum whatever
// the plane size; along rows each value is added in double. The element-wise
// passes compute in float, the deviation x - mean first (exact for values
// near the mean, which float mean holds to half a step), so a large mean costs
// no more precision than the inputs themselves carry.
//
// Memory-bound: every pass reads its inputs once, and the backward passes
// need the layer's output only where a fused residual was added before the
// activation; otherwise the activation's mask is recomputed from x with the
// very operation the forward pass used, so it is the same bits. Output
// pointers may not alias any input. Thread-safe: no state.
#pragma once
#include <cstdint>

#include "core/backend/fused_activation.h"

namespace dtrain::ops {

// sums[c] += sum of (x - shift[c]) and squares[c] += sum of (x - shift[c])^2
// over channel c: both moments in one read of x. The variance from them,
// squares / N - (sums / N)^2, is as precise as the two-pass one only while the
// shift lies within about a standard deviation of the mean.
void channelShiftedMoments(const float* x, int64_t n, int64_t channels, int64_t plane, const float* shift,
                           double* sums, double* squares);
// sums[c] += sum of (x - mean[c])^2 over channel c.
void channelSquaredDeviations(const float* x, int64_t n, int64_t channels, int64_t plane, const float* mean,
                              double* sums);
// y = act(fma(x - mean[c], scale[c], shift[c]) + residual), the normalised
// value rounded to float before the residual (the other input of a fused add;
// may be null: none) is added, as an unfused add would see it.
void batchNormApply(const float* x, float* y, int64_t n, int64_t channels, int64_t plane, const float* mean,
                    const float* scale, const float* shift, const float* residual, FusedActivation act);
// g = dy where act passes a gradient at y (as below), over `count` elements:
// the gradient of a fused add's other input.
void fusedActivationGrad(const float* y, const float* dy, float* g, int64_t count, FusedActivation act);

// What the backward passes read. g = dy where act passes a gradient
// (everywhere for None, where its input is > 0 for Relu, in (0, 6) for Relu6),
// the mask taken from the output y where it is given (a fused residual was
// added before the activation), else from the activation's input recomputed
// from x, mean, scale and shift as batchNormApply computed it.
struct BatchNormGradInputs {
  const float* x = nullptr;
  const float* dy = nullptr;
  const float* y = nullptr;  // the output, or null: the mask recomputed from x
  int64_t n = 0, channels = 0, plane = 1;
  FusedActivation act = FusedActivation::None;
  const float* mean = nullptr;
  const float* scale = nullptr;  // batchNormApply's; read only when y is null and act is not None
  const float* shift = nullptr;
};
// sum_g[c] += sum of g, sum_g_dev[c] += sum of g * (x - mean[c]), over channel
// c; g is also written to `masked` where that is not null (a fused residual's
// gradient, which the input gradient can then read as its dy with act None).
void batchNormGradSums(const BatchNormGradInputs& in, double* sum_g, double* sum_g_dev, float* masked);
// dx = a[c] * g + b[c] * (x - mean[c]) + c[c].
void batchNormInputGrad(const BatchNormGradInputs& in, const float* a, const float* b, const float* c,
                        float* dx);

}  // namespace dtrain::ops
