// Adam and AdamW in double precision, element by element, with the formulas
// of core/optim/adam.h (PyTorch's): the reference the rounding tests measure
// the float optimizer and its planted bugs against.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/config/job_config.h"

namespace dtrain::testing {

class AdamReference {
 public:
  AdamReference(const OptimizerSection& cfg, int64_t n)
      : cfg_(cfg), decoupled_(cfg.type == "adamw"), m_(static_cast<size_t>(n)), v_(static_cast<size_t>(n)) {}

  // One update of p (n values) with gradient g, step >= 1.
  void update(double* p, const float* g, int64_t step) {
    const double t = static_cast<double>(step);
    const double bc1 = 1.0 - std::pow(cfg_.beta1, t), bc2 = 1.0 - std::pow(cfg_.beta2, t);
    for (size_t i = 0; i < m_.size(); ++i) {
      const double pi = decoupled_ ? p[i] * (1.0 - cfg_.lr * cfg_.weight_decay) : p[i];
      const double gi = g[i] + (decoupled_ ? 0.0 : cfg_.weight_decay * pi);
      m_[i] = cfg_.beta1 * m_[i] + (1.0 - cfg_.beta1) * gi;
      v_[i] = cfg_.beta2 * v_[i] + (1.0 - cfg_.beta2) * gi * gi;
      p[i] = pi - cfg_.lr / bc1 * m_[i] / (std::sqrt(v_[i]) / std::sqrt(bc2) + cfg_.eps);
    }
  }

 private:
  OptimizerSection cfg_;
  bool decoupled_;
  std::vector<double> m_, v_;
};

// The largest step |lr / (1 - beta1^t) * m / sqrt(v / (1 - beta2^t))| Adam
// can take at step t, in units of lr, whatever the gradients: m and v weigh
// the same gradients g_s by a_s = (1 - beta1) beta1^(t-s) / (1 - beta1^t) and
// b_s = (1 - beta2) beta2^(t-s) / (1 - beta2^t), and by Cauchy-Schwarz
// |sum a_s g_s| <= sqrt(sum a_s^2 / b_s) sqrt(sum b_s g_s^2). 1 at step 1
// (the step is lr * sign(g) however small g is), 1.0013 at step 2, 1.0030 at 3.
inline double adamStepBound(const OptimizerSection& cfg, int64_t t) {
  const double bc1 = 1.0 - std::pow(cfg.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(cfg.beta2, static_cast<double>(t));
  double sum = 0.0;
  for (int64_t s = 1; s <= t; ++s) {
    const double a = (1.0 - cfg.beta1) * std::pow(cfg.beta1, static_cast<double>(t - s)) / bc1;
    const double b = (1.0 - cfg.beta2) * std::pow(cfg.beta2, static_cast<double>(t - s)) / bc2;
    sum += a * a / b;
  }
  return std::sqrt(sum);
}

}  // namespace dtrain::testing
