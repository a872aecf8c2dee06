#include "core/nn/layers/relu6.h"

#include <algorithm>

#include "core/nn/layers/layer_util.h"

namespace dtrain {

namespace {

// Plain loops: the compiler turns them into vector max/min (and compare/and)
// instructions, as it does relu's (cpu/bias_act.cpp). No restrict: dx may be dy.
// std::max(v, 0) and std::min(v, 6) pass a NaN through; the CUDA kernels
// (core/backend/cuda/clamp_kernels.cu) use the same expressions.
void clampForward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], 0.0f), 6.0f);
}

void clampBackward(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = (y[i] > 0.0f && y[i] < 6.0f) ? dy[i] : 0.0f;
}

}  // namespace

std::unique_ptr<Layer> Relu6::create(const std::string& name, const LayerOptions& options,
                                     const LayerDefaults& defaults) {
  options.finish();
  return std::make_unique<Relu6>(name);
}

Shape Relu6::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  elements_ = s.numel();
  return s;
}

void Relu6::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  clampForward(in[0]->data(), out.data(), out.numel());
}

void Relu6::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                     const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (din[0]) clampBackward(out.data(), dout.data(), din[0]->data(), out.numel());
}

}  // namespace dtrain
