// The element-wise activation a batch_norm applies to its output (a relu or
// relu6 layer fused into it), in one definition for the CPU passes
// (cpu/batch_norm_ops.cpp), the CUDA kernels (cuda/batch_norm_kernels.cu)
// and the relu6 layer on both (nn/layers/relu6.cpp, cuda/clamp_kernels.cu),
// so all compute the same bits. Backward needs only the output.
#pragma once
#include <type_traits>

#include "core/backend/host_device.h"

namespace dtrain::ops {

enum class FusedActivation { None, Relu, Relu6 };

// std::max(v, 0.0f), then std::min(., 6.0f) for relu6, exactly (a NaN passes).
template <FusedActivation A>
DTRAIN_HOST_DEVICE inline float activate(float v) {
  if constexpr (A == FusedActivation::None) return v;
  const float r = v < 0.0f ? 0.0f : v;
  if constexpr (A == FusedActivation::Relu6) return 6.0f < r ? 6.0f : r;
  return r;
}

// dy where the activation's output y passed its input through, else 0.
template <FusedActivation A>
DTRAIN_HOST_DEVICE inline float maskGrad(float y, float dy) {
  if constexpr (A == FusedActivation::Relu) return y > 0.0f ? dy : 0.0f;
  if constexpr (A == FusedActivation::Relu6) return y > 0.0f && y < 6.0f ? dy : 0.0f;
  return dy;
}

// Calls f with the activation as a compile-time constant (host code).
template <class F>
void withActivation(FusedActivation act, F f) {
  switch (act) {
    case FusedActivation::None:
      f(std::integral_constant<FusedActivation, FusedActivation::None>{});
      break;
    case FusedActivation::Relu:
      f(std::integral_constant<FusedActivation, FusedActivation::Relu>{});
      break;
    case FusedActivation::Relu6:
      f(std::integral_constant<FusedActivation, FusedActivation::Relu6>{});
      break;
  }
}

}  // namespace dtrain::ops
