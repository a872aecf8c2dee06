// layer_norm: normalises each sample's last dimension (each token's channels
// of a [T, C] sequence; the whole sample of a flat [C] one) to zero mean and
// unit variance, then scales and shifts it: y = (x - mean) / sqrt(var + eps)
// * weight + bias, as PyTorch's LayerNorm over the last dimension. Weight [C]
// starts at ones, bias [C] at zeros. Options: eps (default 1e-5, > 0).
// Statistics are per token, so they do not depend on the batch or its split.
//
// Ownership and threading: as every Layer; the per-row mean and 1/std kept
// from forward for backward are this instance's.
#pragma once
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

class LayerNorm : public Layer {
 public:
  LayerNorm(std::string name, float eps) : Layer(std::move(name)), eps_(eps) {}
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "layer_norm"; }
  SixteenBitRole sixteenBitRole() const override { return SixteenBitRole::Normalisation; }
  Shape setup(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> paramSpecs() const override;
  void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  int64_t forwardFlops() const override { return 8 * cols_ * rows_per_sample_; }
  std::string describe() const override;
  float eps() const { return eps_; }

 protected:
  float eps_;
  int64_t cols_ = 0, rows_per_sample_ = 0;
  Tensor weight_, bias_, dweight_, dbias_;

 private:
  Scratch stats_;  // mean then 1/std of each row of the last forward
};

}  // namespace dtrain
