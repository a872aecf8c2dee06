// add: the element-wise sum of two or more inputs of one per-sample shape (a
// residual connection: ResNet's block output plus its shortcut). No options.
// Backward hands the output's gradient to every input unchanged. A following
// relu that reads only the sum (ResNet's block output) is fused: applied in
// the same pass, and its mask applied to the gradient handed back.
//
// Ownership and threading: as every Layer; stateless.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

class Add : public Layer {
 public:
  explicit Add(std::string name) : Layer(std::move(name)) {}
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "add"; }
  int numInputs() const override { return kAnyInputs; }
  Shape setup(const std::vector<Shape>& inputs) override;
  // y = ((x0 + x1) + x2) + ...: the order of the sums is fixed, so every device agrees.
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  int64_t forwardFlops() const override { return (inputs_ - 1 + (relu_ ? 1 : 0)) * elements_; }
  std::string describe() const override { return relu_ ? "relu fused" : ""; }
  bool fuseActivation(const std::string& type) override;

 protected:               // the CUDA layer (core/nn/cuda/cuda_add.h) computes with these
  int64_t elements_ = 0;  // per sample
  int64_t inputs_ = 0;
  bool relu_ = false;  // a following relu fused into this layer
};

}  // namespace dtrain
