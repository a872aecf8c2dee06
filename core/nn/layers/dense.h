// dense: y = x W^T + b on flat samples, or on each token of a sequence [T, C].
// Option tie = "LAYER": the weight is that layer's table (an embedding's
// [vocab, dim] for a language model's output), not a parameter of its own. Weight [units, in] (PyTorch
// layout), bias [units]. Options: units (required, > 0), bias (default true), init ("he" | "glorot", default
// from the model).
//
// Ownership and threading: as every Layer (one replica, one thread at a time);
// the parameter views are shared read-only, the gradient views are the
// replica's own, and the scratch buffer is this instance's.
#pragma once
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

struct DenseConfig {
  int64_t units = 0;
  bool bias = true;
  InitKind init = InitKind::HeNormal;
  double init_std = 0.02;  // InitKind::Normal
  std::string tie;         // the layer whose [units, in] table is the weight ("" = its own)
};

class Dense : public Layer {
 public:
  Dense(std::string name, DenseConfig config);
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "dense"; }

  SixteenBitRole sixteenBitRole() const override { return SixteenBitRole::Product; }
  Shape setup(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> paramSpecs() const override;
  void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  bool splitsBackward() const override { return true; }
  int64_t forwardFlops() const override;
  std::string describe() const override;
  bool fuseActivation(const std::string& type) override;
  std::string tiedLayer() const override { return config_.tie; }
  Shape tiedShape() const override { return Shape{config_.units, in_}; }
  void bindTied(const Tensor& weight, const Tensor& grad) override;
  const DenseConfig& config() const { return config_; }

 protected:  // the CUDA layer (core/nn/cuda/cuda_dense.h) computes with these
  DenseConfig config_;
  int64_t in_ = 0;
  int64_t rows_per_sample_ = 1;  // T of a sequence [T, in]; 1 for a flat input
  bool relu_ = false;            // a following relu fused into this layer
  Tensor weight_, bias_, dweight_, dbias_;

 private:
  Scratch masked_;  // dout masked by the fused relu
};

}  // namespace dtrain
