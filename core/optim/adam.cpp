#include "core/optim/adam.h"

#include <cmath>

#include "core/errors.h"

namespace dtrain {

namespace {

// Step-dependent scalars, computed once per range in double and then rounded
// to float, as PyTorch does with its Python-float scalars.
struct AdamScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;  // lr / (1 - beta1^step)
  float bc2_sqrt;   // sqrt(1 - beta2^step)
  float eps;
  float l2;            // weight decay added to the gradient (Adam), else 0
  float decay_factor;  // 1 - lr * weight_decay (AdamW), else 1
};

// Branch-free per element so the compiler can vectorise it. GCC vectorises
// std::sqrt only under -fno-math-errno: otherwise sqrt may set errno, is a call
// with a side effect, and the whole loop stays scalar (several times slower).
void adamLoop(float* p, const float* g, float* m, float* v, int64_t begin, int64_t end,
              const AdamScalars& s) {
  for (int64_t i = begin; i < end; ++i) {
    const float pi = p[i] * s.decay_factor;
    const float gi = g[i] + s.l2 * pi;
    const float mi = s.beta1 * m[i] + s.one_minus_beta1 * gi;
    const float vi = s.beta2 * v[i] + s.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / s.bc2_sqrt + s.eps;
    p[i] = pi - s.step_size * (mi / denom);
  }
}

}  // namespace

Adam::Adam(const OptimizerSection& cfg, bool decoupled_weight_decay)
    : beta1_(cfg.beta1),
      beta2_(cfg.beta2),
      eps_(cfg.eps),
      weight_decay_(cfg.weight_decay),
      decoupled_(decoupled_weight_decay) {}

void Adam::init(int64_t n) {
  n_ = n;
  m_ = Tensor::zeros(Shape{n});
  v_ = Tensor::zeros(Shape{n});
}

void Adam::update(float* params, const float* grads, int64_t begin, int64_t end, const StepInfo& info) {
  checkUpdateRange(name(), begin, end, n_);
  if (info.step < 1) throw Error(name() + ": step must be >= 1, got " + std::to_string(info.step));
  const double step = static_cast<double>(info.step);
  AdamScalars s;
  s.beta1 = static_cast<float>(beta1_);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1_);
  s.beta2 = static_cast<float>(beta2_);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2_);
  s.step_size = static_cast<float>(info.lr / (1.0 - std::pow(beta1_, step)));
  s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2_, step)));
  s.eps = static_cast<float>(eps_);
  s.l2 = decoupled_ ? 0.0f : static_cast<float>(weight_decay_);
  s.decay_factor = decoupled_ ? static_cast<float>(1.0 - info.lr * weight_decay_) : 1.0f;
  adamLoop(params, grads, m_.data(), v_.data(), begin, end, s);
}

std::vector<std::pair<std::string, Tensor*>> Adam::stateBuffers() {
  return {{"adam_m", &m_}, {"adam_v", &v_}};
}

}  // namespace dtrain
