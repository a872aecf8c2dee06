// flatten: [C,H,W] (any rank) -> [C*H*W]. No options. The data are already
// contiguous per sample, so forward and backward are plain copies.
//
// Ownership and threading: as every Layer; stateless.
#pragma once
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

class Flatten : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "flatten"; }

  SixteenBitRole sixteenBitRole() const override { return SixteenBitRole::Reshape; }
  Shape setup(const std::vector<Shape>& inputs) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
};

}  // namespace dtrain
