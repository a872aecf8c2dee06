#include "core/nn/layers/gelu.h"

#include "core/backend/sequence_ops.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

std::unique_ptr<Layer> Gelu::create(const std::string& name, const LayerOptions& options,
                                    const LayerDefaults& defaults) {
  options.finish();
  return std::make_unique<Gelu>(name);
}

Shape Gelu::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  elements_ = s.numel();
  return s;
}

void Gelu::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  ops::geluForward(in[0]->data(), out.data(), out.numel());
}

void Gelu::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                    const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (din[0]) ops::geluBackward(in[0]->data(), dout.data(), din[0]->data(), out.numel());
}

}  // namespace dtrain
