// Adam and AdamW with PyTorch's formulas (torch.optim.Adam / AdamW, amsgrad off):
//   Adam:  g = grad + weight_decay * p          (L2 added to the gradient)
//   AdamW: p *= 1 - lr * weight_decay           (decoupled, before the step)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// One class, because the two differ only in where the weight decay goes.
//
// Ownership and threading: see optimizer.h.
#pragma once
#include "core/optim/optimizer.h"

namespace dtrain {

class Adam : public Optimizer {
 public:
  // decoupled_weight_decay = true gives AdamW.
  Adam(const OptimizerSection& cfg, bool decoupled_weight_decay);

  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }
  using Optimizer::init;
  void init(int64_t n, Device device) override;
  // info.step must be >= 1 (it drives the bias corrections).
  void update(float* params, const float* grads, int64_t begin, int64_t end, const StepInfo& info) override;
  void writeStepScalars(const StepInfo& info, StepScalars& out) const override;
  std::vector<std::pair<std::string, Tensor*>> stateBuffers() override;

 private:
  double beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;
  int64_t n_ = 0;
  Device device_;
  Tensor m_;  // first moment, n floats
  Tensor v_;  // second moment, n floats
};

}  // namespace dtrain
