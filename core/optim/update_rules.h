// The optimizers' per-element update rules, shared by the CPU loops
// (sgd.cpp, adam.cpp) and the CUDA kernels (core/backend/cuda/optimizer_kernels.cu),
// so both apply the same formulas in the same float precision. The
// step-dependent scalars are computed once per update on the host in double
// and rounded to float, as PyTorch does with its Python-float scalars; the
// element rules are float only and branch-free, so the CPU loops vectorise.
// See sgd.h and adam.h for the formulas and their PyTorch semantics.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/backend/host_device.h"

namespace dtrain::update_rules {

// ------------------------------------------------------------------ SGD --

struct SgdScalars {
  float lr, weight_decay, momentum;
};

inline SgdScalars sgdScalars(double lr, double momentum, double weight_decay) {
  return {static_cast<float>(lr), static_cast<float>(weight_decay), static_cast<float>(momentum)};
}

// Without momentum: p -= lr * (g + wd * p).
DTRAIN_HOST_DEVICE inline float sgdPlain(float p, float g, const SgdScalars& s) {
  return p - s.lr * (g + s.weight_decay * p);
}

// With momentum (a zero-initialised buffer, so no first-step special case).
template <bool kNesterov>
DTRAIN_HOST_DEVICE inline void sgdMomentum(float& p, float g, float& buf, const SgdScalars& s) {
  const float d = g + s.weight_decay * p;
  const float b = s.momentum * buf + d;
  buf = b;
  p -= s.lr * (kNesterov ? d + s.momentum * b : b);
}

// ----------------------------------------------------------------- Adam --

struct AdamScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;  // lr / (1 - beta1^step)
  float bc2_sqrt;   // sqrt(1 - beta2^step)
  float eps;
  float l2;            // weight decay added to the gradient (Adam), else 0
  float decay_factor;  // 1 - lr * weight_decay (AdamW), else 1
};

// For step >= 1 (the caller checks). decoupled = AdamW.
inline AdamScalars adamScalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                               bool decoupled, int64_t step) {
  const auto t = static_cast<double>(step);
  AdamScalars s;
  s.beta1 = static_cast<float>(beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t)));
  s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
  s.eps = static_cast<float>(eps);
  s.l2 = decoupled ? 0.0f : static_cast<float>(weight_decay);
  s.decay_factor = decoupled ? static_cast<float>(1.0 - lr * weight_decay) : 1.0f;
  return s;
}

// IEEE-rounded single-precision square root on both sides (nvcc's default
// -prec-sqrt=true; the host's sqrtss / vsqrtps).
DTRAIN_HOST_DEVICE inline float sqrtOf(float x) {
#if defined(__CUDA_ARCH__)
  return sqrtf(x);
#else
  return std::sqrt(x);
#endif
}

DTRAIN_HOST_DEVICE inline void adam(float& p, float g, float& m, float& v, const AdamScalars& s) {
  const float pi = p * s.decay_factor;
  const float gi = g + s.l2 * pi;
  const float mi = s.beta1 * m + s.one_minus_beta1 * gi;
  const float vi = s.beta2 * v + s.one_minus_beta2 * gi * gi;
  m = mi;
  v = vi;
  const float denom = sqrtOf(vi) / s.bc2_sqrt + s.eps;
  p = pi - s.step_size * (mi / denom);
}

}  // namespace dtrain::update_rules
