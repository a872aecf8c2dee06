#include "core/optim/adam.h"

#include <cstring>

#include "core/backend/device_ops.h"
#include "core/errors.h"
#include "core/optim/update_rules.h"

namespace dtrain {

namespace {

// Branch-free per element so the compiler can vectorise it. GCC vectorises
// std::sqrt only under -fno-math-errno: otherwise sqrt may set errno, is a call
// with a side effect, and the whole loop stays scalar (several times slower).
// The element rule lives in update_rules.h, shared with the CUDA kernels.
void adamLoop(float* p, const float* g, float* m, float* v, int64_t begin, int64_t end,
              const update_rules::AdamScalars& s) {
  for (int64_t i = begin; i < end; ++i) update_rules::adam(p[i], g[i], m[i], v[i], s);
}

}  // namespace

Adam::Adam(const OptimizerSection& cfg, bool decoupled_weight_decay)
    : beta1_(cfg.beta1),
      beta2_(cfg.beta2),
      eps_(cfg.eps),
      weight_decay_(cfg.weight_decay),
      decoupled_(decoupled_weight_decay) {}

void Adam::init(int64_t n, Device device) {
  n_ = n;
  device_ = device;
  m_ = Tensor::zeros(Shape{n}, device);
  v_ = Tensor::zeros(Shape{n}, device);
}

void Adam::update(float* params, const float* grads, int64_t begin, int64_t end, const StepInfo& info) {
  checkUpdateRange(name(), begin, end, n_);
  if (info.step < 1) throw Error(name() + ": step must be >= 1, got " + std::to_string(info.step));
  // AdamW's decay passes some tensors by (DecayMask): those pieces update
  // with none.
  const bool masked = decoupled_ && weight_decay_ != 0.0 && !decay_mask_.all();
  if (!device_.isCpu() && info.on_device) {
    if (masked)
      throw Error(name() +
                  ": an update whose scalars are read on the device decays every tensor; "
                  "this one decays only some (DecayMask)");
    device_ops::adamUpdateFromDevice(device_, params + begin, grads + begin, m_.data() + begin,
                                     v_.data() + begin, end - begin, info.on_device,
                                     info.half_copy.at(begin));
    return;
  }
  if (!device_.isCpu()) {
    auto piece = [&](int64_t b, int64_t e, bool decays) {
      device_ops::adamUpdate(device_, params + b, grads + b, m_.data() + b, v_.data() + b, e - b, info.lr,
                             beta1_, beta2_, eps_, decays ? weight_decay_ : 0.0, decoupled_, info.step,
                             info.half_copy.at(b));
    };
    if (masked)
      decay_mask_.split(begin, end, piece);
    else
      piece(begin, end, true);
    return;
  }
  const update_rules::AdamScalars s =
      update_rules::adamScalars(info.lr, beta1_, beta2_, eps_, weight_decay_, decoupled_, info.step);
  if (!masked) {
    adamLoop(params, grads, m_.data(), v_.data(), begin, end, s);
    return;
  }
  const update_rules::AdamScalars undecayed =
      update_rules::adamScalars(info.lr, beta1_, beta2_, eps_, 0.0, decoupled_, info.step);
  decay_mask_.split(begin, end, [&](int64_t b, int64_t e, bool decays) {
    adamLoop(params, grads, m_.data(), v_.data(), b, e, decays ? s : undecayed);
  });
}

void Adam::writeStepScalars(const StepInfo& info, StepScalars& out) const {
  if (info.step < 1) throw Error(name() + ": step must be >= 1, got " + std::to_string(info.step));
  const update_rules::AdamScalars s =
      update_rules::adamScalars(info.lr, beta1_, beta2_, eps_, weight_decay_, decoupled_, info.step);
  static_assert(sizeof s <= sizeof out.optimizer, "StepScalars::optimizer holds AdamScalars");
  std::memcpy(out.optimizer, &s, sizeof s);
}

std::vector<std::pair<std::string, Tensor*>> Adam::stateBuffers() {
  return {{"adam_m", &m_}, {"adam_v", &v_}};
}

}  // namespace dtrain
