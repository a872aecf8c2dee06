// gelu: GPT-2's tanh approximation, y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// any shape. No options. Backward reads the input (the output does not
// determine it: gelu is not monotonic below about -0.75).
//
// Ownership and threading: as every Layer; stateless.
#pragma once
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

class Gelu : public Layer {
 public:
  explicit Gelu(std::string name) : Layer(std::move(name)) {}
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "gelu"; }
  Shape setup(const std::vector<Shape>& inputs) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  int64_t forwardFlops() const override { return 8 * elements_; }

 protected:
  int64_t elements_ = 0;
};

}  // namespace dtrain
