#include "core/optim/sgd.h"

#include <cstring>

#include "core/backend/device_ops.h"
#include "core/errors.h"
#include "core/optim/update_rules.h"

namespace dtrain {

namespace {

// The loops below are branch-free per element so the compiler vectorises them;
// the variant is chosen once per range instead. The element rules live in
// update_rules.h, shared with the CUDA kernels.

void sgdPlain(float* p, const float* g, int64_t begin, int64_t end, const update_rules::SgdScalars& s) {
  for (int64_t i = begin; i < end; ++i) p[i] = update_rules::sgdPlain(p[i], g[i], s);
}

template <bool kNesterov>
void sgdMomentum(float* p, const float* g, float* buf, int64_t begin, int64_t end,
                 const update_rules::SgdScalars& s) {
  for (int64_t i = begin; i < end; ++i) update_rules::sgdMomentum<kNesterov>(p[i], g[i], buf[i], s);
}

}  // namespace

Sgd::Sgd(const OptimizerSection& cfg)
    : momentum_(cfg.momentum), nesterov_(cfg.nesterov), weight_decay_(cfg.weight_decay) {
  if (nesterov_ && momentum_ <= 0.0)
    throw ConfigError("optimizer.nesterov = true needs optimizer.momentum > 0");
}

void Sgd::init(int64_t n, Device device) {
  n_ = n;
  device_ = device;
  momentum_buf_ = momentum_ != 0.0 ? Tensor::zeros(Shape{n}, device) : Tensor();
}

void Sgd::update(float* params, const float* grads, int64_t begin, int64_t end, const StepInfo& info) {
  checkUpdateRange(name(), begin, end, n_);
  if (!device_.isCpu() && info.on_device) {
    device_ops::sgdUpdateFromDevice(device_, params + begin, grads + begin,
                                    momentum_ != 0.0 ? momentum_buf_.data() + begin : nullptr, end - begin,
                                    momentum_ != 0.0, nesterov_, info.on_device, info.half_copy.at(begin));
    return;
  }
  if (!device_.isCpu()) {
    device_ops::sgdUpdate(device_, params + begin, grads + begin,
                          momentum_ != 0.0 ? momentum_buf_.data() + begin : nullptr, end - begin, info.lr,
                          momentum_, nesterov_, weight_decay_, info.half_copy.at(begin));
    return;
  }
  const update_rules::SgdScalars s = update_rules::sgdScalars(info.lr, momentum_, weight_decay_);
  if (momentum_ == 0.0)
    sgdPlain(params, grads, begin, end, s);
  else if (nesterov_)
    sgdMomentum<true>(params, grads, momentum_buf_.data(), begin, end, s);
  else
    sgdMomentum<false>(params, grads, momentum_buf_.data(), begin, end, s);
}

void Sgd::writeStepScalars(const StepInfo& info, StepScalars& out) const {
  const update_rules::SgdScalars s = update_rules::sgdScalars(info.lr, momentum_, weight_decay_);
  static_assert(sizeof s <= sizeof out.optimizer, "StepScalars::optimizer holds SgdScalars");
  std::memcpy(out.optimizer, &s, sizeof s);
}

std::vector<std::pair<std::string, Tensor*>> Sgd::stateBuffers() {
  if (momentum_ == 0.0) return {};
  return {{"momentum", &momentum_buf_}};
}

}  // namespace dtrain
