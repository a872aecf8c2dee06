// avg_pool: the mean of each window, per channel, padding counted as zeros
// (PyTorch's count_include_pad=True). Options: see pool_config.h.
//
// Ownership and threading: as every Layer; stateless between calls.
#pragma once
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"
#include "core/nn/layers/pool_config.h"

namespace dtrain {

class AvgPool : public Layer {
 public:
  AvgPool(std::string name, PoolConfig config);
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "avg_pool"; }
  Shape setup(const std::vector<Shape>& inputs) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  int64_t forwardFlops() const override;
  std::string describe() const override { return describePool(config_); }
  const PoolConfig& config() const { return config_; }

 protected:  // the CUDA layer (core/nn/cuda/cuda_pool.h) computes with these
  PoolConfig config_;
  ops::Window2d geom_;
};

}  // namespace dtrain
