// batch_norm's training statistics from the one round of shifted sums its
// replicas add up through a StatsReducer (core/nn/layers/batch_norm.h):
// the vector each replica contributes, per channel c of C,
//   [count, count * K[c], sum (x - K[c]), sum (x - K[c])^2]
// with K the running mean when the forward pass began. The CPU layer and the
// CUDA layer (core/nn/cuda/cuda_batch_norm.h) both read it here, so ranks of
// either kind make the same decision about a second round of squared
// deviations and ask their reducer for the same vectors in the same order.
#pragma once
#include <cstdint>

#include "core/nn/layer.h"

namespace dtrain::batch_norm_moments {

// Length of the vector above.
inline int64_t shiftedSumsSize(int64_t channels) { return 1 + 3 * channels; }

// From the summed vector `sums` and this replica's shifts `shift` (C each):
// mean[c] = K[c] + d and variance[c] = sum (x - K)^2 / count - d^2, d = sum (x
// - K) / count, in double. Returns true when for some channel d^2 exceeds that
// variance (or either is NaN): the shift lies beyond a standard deviation of
// the batch mean, the difference has cancelled, and the caller must replace
// the variances by a second round of squared deviations from the mean.
// Throws Error, naming `layer`, when a finite shift times the summed count is
// not the summed count * K: the replicas' shifts differed, so their sums mean
// nothing together (an internal error).
bool fromShiftedSums(const double* sums, const float* shift, int64_t channels, const Layer& layer,
                     double* mean, double* variance);

}  // namespace dtrain::batch_norm_moments
