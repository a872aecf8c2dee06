// max_pool: the maximum of each window, per channel; padding never wins.
// Options: see pool_config.h. A training forward records each window's
// argmax, which backward routes the gradient to, so backward must follow a
// training forward (ctx.training) of the same batch, as the trainer does.
//
// Ownership and threading: as every Layer; the argmax buffer is per instance.
#pragma once
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"
#include "core/nn/layers/pool_config.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

class MaxPool : public Layer {
 public:
  MaxPool(std::string name, PoolConfig config);
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "max_pool"; }
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

 private:
  IndexScratch argmax_;
};

}  // namespace dtrain
