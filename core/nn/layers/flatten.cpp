#include "core/nn/layers/flatten.h"

#include "core/nn/layers/layer_util.h"

namespace dtrain {

std::unique_ptr<Layer> Flatten::create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults) {
  options.finish();
  return std::make_unique<Flatten>(name);
}

Shape Flatten::setup(const std::vector<Shape>& inputs) {
  return Shape{layer_util::singleInput(*this, inputs).numel()};
}

void Flatten::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  out.copyFrom(*in[0]);
}

void Flatten::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                       const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (din[0]) din[0]->copyFrom(dout);
}

}  // namespace dtrain
