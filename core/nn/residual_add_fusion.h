// Optional fusion of a residual add into the layer before it, beside
// Layer::fuseActivation: a layer whose only reader is an add of two inputs
// (ResNet's conv -> batch_norm -> add(shortcut)) may compute
// y = act(f(x) + r) itself, r being the add's other input, saving the add's
// memory passes (it would read f(x) and r and write y, then backward copy the
// gradient twice). Model (core/nn/model.h) asks through this interface,
// which a layer implements beside Layer, and then hands the layer r as a
// second input; the add becomes an alias of the layer's output.
#pragma once

namespace dtrain {

class ResidualAddFusion {
 public:
  virtual ~ResidualAddFusion() = default;
  // Called after setup() and before bind(), before any fuseActivation (the
  // activation then applies to the sum). Returns true when the layer accepts:
  // from then on forward takes in[1] = r (the layer's output shape) and adds
  // it before the activation, and backward writes din[1] (when non-null) =
  // the output gradient masked by the activation, which is r's gradient.
  virtual bool fuseResidualAdd() = 0;
};

}  // namespace dtrain
