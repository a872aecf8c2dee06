// batch_norm: batch normalisation as PyTorch's BatchNorm2d (input [C,H,W],
// statistics per channel over N, H, W) and BatchNorm1d (input [C], per
// feature over N): y = (x - mean) / sqrt(var + epsilon) * gamma + beta.
// Options: momentum (default 0.1, in [0, 1]; running = (1 - momentum) *
// running + momentum * batch, PyTorch's convention), epsilon (default 1e-5,
// > 0), scale (default true: a trained gamma, "weight", initialised to 1) and
// center (default true: a trained beta, "bias", initialised to 0), as Keras.
// Buffers (saved in checkpoints, not trained): running_mean (0) and
// running_var (1). A following add of two inputs that reads only this
// layer's output may be fused (fuseResidualAdd: y = bn(x) + r, r the add's
// other input, as the model's second input of this layer), and then, or
// instead, a following relu or relu6 (fuseActivation: y = act(bn(x) [+ r])).
//
// Training passes normalise with the batch's mean and biased variance, and
// the running variance takes the unbiased one (PyTorch's rule); inference
// passes use the running statistics.
//
// The batch is the whole batch of the rank (or, with [strategy]
// sync_batchnorm, of all ranks), not the slice of the replica computing:
// the per-channel sums go through LayerContext::stats_reducer, so results do
// not depend on how the batch is split across threads. Forward reduces
// [count, sum (x - K), sum (x - K)^2] per channel in one round, K being the
// running mean (the same on every replica): one read of the input and one
// reduction. Unshifted, E[x^2] - mean^2 would cancel catastrophically in
// float sums when |mean| is large against the spread (a batch_norm after a
// layer without bias easily has that); shifted by K it loses little while K
// is within a standard deviation of the batch mean. When it is not (the
// first steps, or a change in the data) a second round sums the squared
// deviations from the batch mean itself, which lose nothing. Backward
// reduces [sum g, sum g * (x - mean)] once. Parameter gradients take only
// this replica's part (the replicas' gradients are summed later, like every
// parameter's); running statistics are written by the replica with
// LayerContext::updates_buffers.
//
// Ownership and threading: as every Layer; the per-channel statistics of the
// last forward are kept for backward.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/backend/batch_norm_ops.h"
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"
#include "core/nn/residual_add_fusion.h"

namespace dtrain {

struct BatchNormConfig {
  double momentum = 0.1;
  double epsilon = 1e-5;
  bool scale = true;   // gamma
  bool center = true;  // beta
};

class BatchNorm : public Layer, public ResidualAddFusion {
 public:
  BatchNorm(std::string name, BatchNormConfig config);
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "batch_norm"; }

  SixteenBitRole sixteenBitRole() const override { return SixteenBitRole::Normalisation; }
  Shape setup(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> paramSpecs() const override;
  void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override;
  std::vector<ParamSpec> bufferSpecs() const override;
  void bindBuffers(const std::vector<Tensor>& buffers) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  // Accepts one "relu" or "relu6".
  bool fuseActivation(const std::string& type) override;
  // Accepts once, before any activation is fused.
  bool fuseResidualAdd() override;
  int64_t forwardFlops() const override;
  std::string describe() const override;

  const BatchNormConfig& config() const { return config_; }
  ops::FusedActivation activation() const { return act_; }
  bool addsResidual() const { return residual_; }

 protected:  // the CUDA layer (core/nn/cuda/cuda_batch_norm.h) computes with these
  // Throws ShapeError unless a training pass has more than one value per
  // channel (the unbiased variance divides by count - 1).
  void checkTrainingCount(double count) const;

  BatchNormConfig config_;
  int64_t channels_ = 0;
  int64_t plane_ = 1;  // H*W, or 1 for [C] inputs
  ops::FusedActivation act_ = ops::FusedActivation::None;
  bool residual_ = false;                 // a fused add: forward's in[1] is added before act_
  Tensor gamma_, beta_, dgamma_, dbeta_;  // undefined without scale / center
  Tensor running_mean_, running_var_;

 private:
  // Per-channel statistics of the last forward (the batch's in training, the
  // running ones at inference) and the coefficients of the passes.
  std::vector<double> sums_, deviations_, grad_sums_, batch_mean_, variance_;
  std::vector<float> mean_, invstd_, scale_, shift_, coef_a_, coef_b_, coef_c_;
  std::vector<float> moment_shift_;  // K: the running mean when the forward began
  double count_ = 0.0;               // values per channel in the last training batch, all replicas
};

}  // namespace dtrain
