#include "core/optim/sgd.h"

#include "core/errors.h"

namespace dtrain {

namespace {

// The loops below are branch-free per element so the compiler vectorises them;
// the variant is chosen once per range instead.

void sgdPlain(float* p, const float* g, int64_t begin, int64_t end, float lr, float wd) {
  for (int64_t i = begin; i < end; ++i) p[i] -= lr * (g[i] + wd * p[i]);
}

template <bool kNesterov>
void sgdMomentum(float* p, const float* g, float* buf, int64_t begin, int64_t end, float lr, float wd,
                 float mom) {
  for (int64_t i = begin; i < end; ++i) {
    const float d = g[i] + wd * p[i];
    const float b = mom * buf[i] + d;
    buf[i] = b;
    p[i] -= lr * (kNesterov ? d + mom * b : b);
  }
}

}  // namespace

Sgd::Sgd(const OptimizerSection& cfg)
    : momentum_(cfg.momentum), nesterov_(cfg.nesterov), weight_decay_(cfg.weight_decay) {
  if (nesterov_ && momentum_ <= 0.0)
    throw ConfigError("optimizer.nesterov = true needs optimizer.momentum > 0");
}

void Sgd::init(int64_t n) {
  n_ = n;
  momentum_buf_ = momentum_ != 0.0 ? Tensor::zeros(Shape{n}) : Tensor();
}

void Sgd::update(float* params, const float* grads, int64_t begin, int64_t end, const StepInfo& info) {
  checkUpdateRange(name(), begin, end, n_);
  const auto lr = static_cast<float>(info.lr);
  const auto wd = static_cast<float>(weight_decay_);
  const auto mom = static_cast<float>(momentum_);
  if (momentum_ == 0.0)
    sgdPlain(params, grads, begin, end, lr, wd);
  else if (nesterov_)
    sgdMomentum<true>(params, grads, momentum_buf_.data(), begin, end, lr, wd, mom);
  else
    sgdMomentum<false>(params, grads, momentum_buf_.data(), begin, end, lr, wd, mom);
}

std::vector<std::pair<std::string, Tensor*>> Sgd::stateBuffers() {
  if (momentum_ == 0.0) return {};
  return {{"momentum", &momentum_buf_}};
}

}  // namespace dtrain
