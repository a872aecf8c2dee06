// relu6: y = min(max(x, 0), 6), any shape (MobileNet's activation: bounded,
// so low-precision inference keeps its range). No options. Backward uses the
// output: the gradient passes where 0 < y < 6, which is exactly 0 < x < 6.
//
// Ownership and threading: as every Layer; stateless.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

class Relu6 : public Layer {
 public:
  explicit Relu6(std::string name) : Layer(std::move(name)) {}
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "relu6"; }
  Shape setup(const std::vector<Shape>& inputs) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  int64_t forwardFlops() const override { return 2 * elements_; }

 protected:  // the CUDA layer (core/nn/cuda/cuda_relu6.h) computes with it
  int64_t elements_ = 0;
};

}  // namespace dtrain
