// Helpers of the CUDA tests that compare a GPU result with the CPU's: random
// host tensors, copies to and from the GPU, and a normwise relative error.
#pragma once
#include <algorithm>
#include <cmath>
#include <random>

#include "core/tensor/tensor.h"

namespace dtrain::testing {

inline Device gpuDevice() { return Device::cuda(0); }

// Uniform in [-scale, scale], from a seeded generator (fresh per call site).
inline Tensor randomHost(const Shape& shape, std::mt19937& rng, float scale = 1.0f) {
  Tensor t = Tensor::empty(shape);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = u(rng);
  return t;
}

// max |got - want| / max |want| over all elements (got may be on the GPU).
inline double relativeError(const Tensor& got, const Tensor& want) {
  Tensor g = got.to(Device::cpu());
  double diff = 0, scale = 1e-12;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::fabs(double(g.data()[i]) - want.data()[i]));
    scale = std::max(scale, std::fabs(double(want.data()[i])));
  }
  return diff / scale;
}

}  // namespace dtrain::testing
