#include "core/nn/layers/add.h"

#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

namespace {

// y = a + b; y may be a (the running sum of three or more inputs).
void sumOf(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

}  // namespace

std::unique_ptr<Layer> Add::create(const std::string& name, const LayerOptions& options,
                                   const LayerDefaults& defaults) {
  options.finish();
  return std::make_unique<Add>(name);
}

Shape Add::setup(const std::vector<Shape>& inputs) {
  if (inputs.size() < 2)
    throw ShapeError(layer_util::label(*this) + " takes two or more inputs, got " +
                     std::to_string(inputs.size()));
  for (size_t i = 1; i < inputs.size(); ++i)
    if (inputs[i] != inputs[0])
      throw ShapeError(layer_util::label(*this) + " sums inputs of one shape, but input 0 is " +
                       inputs[0].str() + " and input " + std::to_string(i) + " is " + inputs[i].str());
  elements_ = inputs[0].numel();
  inputs_ = static_cast<int64_t>(inputs.size());
  return inputs[0];
}

void Add::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = out.numel();
  sumOf(in[0]->data(), in[1]->data(), out.data(), n);
  for (size_t i = 2; i < in.size(); ++i) sumOf(out.data(), in[i]->data(), out.data(), n);
}

void Add::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                   const std::vector<Tensor*>& din, const LayerContext& ctx) {
  for (Tensor* d : din)
    if (d) d->copyFrom(dout);
}

}  // namespace dtrain
