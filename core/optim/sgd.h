// Stochastic gradient descent with optional momentum, Nesterov momentum and L2
// weight decay, with PyTorch's torch.optim.SGD semantics (dampening 0):
//   g = grad + weight_decay * p
//   buf = momentum * buf + g            (only when momentum != 0)
//   g = nesterov ? g + momentum * buf : buf
//   p -= lr * g
// PyTorch sets buf = g at the first step; a zero-initialised buffer gives the
// same value, so there is no first-step special case.
//
// Ownership and threading: see optimizer.h. The momentum buffer is allocated
// only when momentum != 0.
#pragma once
#include "core/optim/optimizer.h"

namespace dtrain {

class Sgd : public Optimizer {
 public:
  // Throws ConfigError for nesterov without momentum (as PyTorch does).
  explicit Sgd(const OptimizerSection& cfg);

  std::string name() const override { return "sgd"; }
  using Optimizer::init;
  void init(int64_t n, Device device) override;
  void update(float* params, const float* grads, int64_t begin, int64_t end, const StepInfo& info) override;
  void writeStepScalars(const StepInfo& info, StepScalars& out) const override;
  std::vector<std::pair<std::string, Tensor*>> stateBuffers() override;

 private:
  double momentum_;
  bool nesterov_;
  double weight_decay_;
  int64_t n_ = 0;
  Device device_;
  Tensor momentum_buf_;  // n floats when momentum_ != 0, else undefined
};

}  // namespace dtrain
