// The global-norm clipping factor (grad_clip.h) as one definition for the CPU
// and the CUDA kernel that computes it on the device (a GPU step then clips
// without reading the norm back to the host).
#pragma once
#include <math.h>

#include "core/backend/host_device.h"

namespace dtrain::clip_rule {

// min(1, max_norm / (norm + 1e-6)) with norm = sqrt(sum_of_squares); 1 when
// max_norm <= 0. A NaN coefficient stays NaN (not std::min, which would hide it).
DTRAIN_HOST_DEVICE inline float factor(double sum_of_squares, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  const double coef = max_norm / (::sqrt(sum_of_squares) + 1e-6);
  const bool nan = coef != coef;
  return static_cast<float>(coef < 1.0 || nan ? coef : 1.0);
}

}  // namespace dtrain::clip_rule
