#include "core/nn/layers/batch_norm_moments.h"

#include <cmath>

#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain::batch_norm_moments {

bool fromShiftedSums(const double* sums, const float* shift, int64_t channels, const Layer& layer,
                     double* mean, double* variance) {
  const double count = sums[0];
  const double* count_shift = sums + 1;
  const double* shifted = count_shift + channels;
  const double* squares = shifted + channels;
  bool far_shift = false;
  for (int64_t k = 0; k < channels; ++k) {
    // Exact in double for equal shifts (count * K needs at most 53 bits).
    if (std::isfinite(shift[k]) && count_shift[k] != count * shift[k])
      throw Error(layer_util::label(layer) +
                  ": the replicas' running means differ, so their batch statistics cannot be summed "
                  "(an internal error; please report it)");
    const double d = shifted[k] / count;
    mean[k] = shift[k] + d;
    variance[k] = squares[k] / count - d * d;
    far_shift = far_shift || !(d * d <= variance[k]);  // NaN included
  }
  return far_shift;
}

}  // namespace dtrain::batch_norm_moments
