#include "core/nn/layers/add.h"

#include <algorithm>

#include "core/backend/ops.h"
#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

namespace {

// y = a + b; y may be a (the running sum of three or more inputs).
void sumOf(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

// y = max(a + b, 0): the last sum with the fused relu.
void sumRelu(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(a[i] + b[i], 0.0f);
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

bool Add::fuseActivation(const std::string& type) {
  if (type != "relu" || relu_) return false;
  relu_ = true;
  return true;
}

void Add::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = out.numel();
  const size_t last = in.size() - 1;
  const float* sum = in[0]->data();
  for (size_t i = 1; i < in.size(); ++i) {
    (relu_ && i == last ? sumRelu : sumOf)(sum, in[i]->data(), out.data(), n);
    sum = out.data();
  }
}

void Add::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                   const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const Tensor* first = nullptr;  // the first gradient written; the others copy it
  for (Tensor* d : din) {
    if (!d) continue;
    if (first) {
      d->copyFrom(*first);
    } else if (relu_) {
      ops::reluBackward(out.data(), dout.data(), d->data(), dout.numel());
    } else {
      d->copyFrom(dout);
    }
    first = d;
  }
}

}  // namespace dtrain
