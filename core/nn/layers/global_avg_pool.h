// global_avg_pool: the mean of each channel's plane, [C,H,W] -> [C] (as
// Keras's GlobalAveragePooling2D and the pooling before a ResNet's or
// MobileNet's classifier). No options.
//
// Ownership and threading: as every Layer; stateless.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

class GlobalAvgPool : public Layer {
 public:
  explicit GlobalAvgPool(std::string name) : Layer(std::move(name)) {}
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "global_avg_pool"; }
  Shape setup(const std::vector<Shape>& inputs) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  int64_t forwardFlops() const override { return channels_ * plane_; }

 protected:  // the CUDA layer (core/nn/cuda/cuda_global_avg_pool.h) computes with these
  int64_t channels_ = 0, height_ = 0, width_ = 0, plane_ = 0;
};

}  // namespace dtrain
