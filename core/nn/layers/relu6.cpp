#include "core/nn/layers/relu6.h"

#include "core/backend/fused_activation.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

namespace {

using ops::FusedActivation;

// Plain loops: the compiler turns them into vector max/min (and compare/and)
// instructions, as it does relu's (cpu/bias_act.cpp). No restrict: dx may be dy.
// The element expressions are the ones batch_norm's fused relu6 and the CUDA
// kernels (core/backend/cuda/clamp_kernels.cu) use (core/backend/fused_activation.h).
void clampForward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ops::activate<FusedActivation::Relu6>(x[i]);
}

void clampBackward(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = ops::maskGrad<FusedActivation::Relu6>(y[i], dy[i]);
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
