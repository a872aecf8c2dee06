#include "core/nn/layers/relu.h"

#include "core/backend/ops.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

std::unique_ptr<Layer> Relu::create(const std::string& name, const LayerOptions& options,
                                    const LayerDefaults& defaults) {
  options.finish();
  return std::make_unique<Relu>(name);
}

Shape Relu::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  elements_ = s.numel();
  return s;
}

void Relu::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  ops::reluForward(in[0]->data(), out.data(), out.numel());
}

void Relu::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                    const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (din[0]) ops::reluBackward(out.data(), dout.data(), din[0]->data(), out.numel());
}

}  // namespace dtrain
