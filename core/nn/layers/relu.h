// relu: y = max(x, 0), any shape. No options. Backward uses the output
// (y > 0 exactly where x > 0), so the input need not be kept.
//
// Ownership and threading: as every Layer; stateless.
#pragma once
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

class Relu : public Layer {
 public:
  explicit Relu(std::string name) : Layer(std::move(name)) {}
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "relu"; }
  Shape setup(const std::vector<Shape>& inputs) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  int64_t forwardFlops() const override { return elements_; }

 protected:  // the CUDA layer (core/nn/cuda/cuda_relu.h) computes with it
  int64_t elements_ = 0;
};

}  // namespace dtrain
