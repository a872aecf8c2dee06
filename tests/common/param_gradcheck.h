// Central differences of a model's loss against the gradients backward wrote,
// for every parameter of a ParamStore. A parameter whose left and right
// differences disagree by more than the tolerance has a relu kink within the
// step and is skipped (counted); the others get a score, |numeric -
// analytic| / (atol + rtol |analytic|), and the worst is reported.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "core/nn/param_store.h"

namespace dtrain::testing {

struct ParamGradcheck {
  int64_t checked = 0, skipped = 0;
  double worst = 0.0;  // <= 1: within the tolerance
  std::string where;   // the worst parameter, its numeric and analytic gradient
};

// `analytic` is a gradient buffer in the store's layout; loss() recomputes
// the loss from the store's current parameters.
inline ParamGradcheck checkParamGradients(ParamStore& store, const Tensor& analytic,
                                          const std::function<double()>& loss, float eps, double atol,
                                          double rtol) {
  ParamGradcheck out;
  const double base = loss();
  for (size_t i = 0; i < store.entries().size(); ++i) {
    Tensor value = store.view(store.params(), i);
    const Tensor g = store.view(analytic, i);
    for (int64_t k = 0; k < value.numel(); ++k) {
      float* p = value.data() + k;
      const float saved = *p;
      *p = saved + eps;
      const double up = static_cast<double>(*p) - saved;  // the step as stored in float
      const double plus = loss();
      *p = saved - eps;
      const double down = saved - static_cast<double>(*p);
      const double minus = loss();
      *p = saved;
      const double right = (plus - base) / up, left = (base - minus) / down;
      const double a = g.data()[k];
      const double tolerance = atol + rtol * std::fabs(a);
      if (std::fabs(right - left) > tolerance) {  // a relu kink within the step
        ++out.skipped;
        continue;
      }
      const double score = std::fabs((right + left) / 2.0 - a) / tolerance;
      ++out.checked;
      if (score > out.worst) {
        out.worst = score;
        out.where = store.entries()[i].name + "[" + std::to_string(k) + "]: numeric " +
                    std::to_string((right + left) / 2.0) + ", analytic " + std::to_string(a);
      }
    }
  }
  return out;
}

}  // namespace dtrain::testing
