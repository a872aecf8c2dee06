// Helpers shared by the optimizer tests: run a few updates over a small buffer
// and compare against expected values with a float-sized tolerance.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "core/optim/optimizer.h"

namespace dtrain::testing {

// Initial parameters and the gradients of steps 1..3 used by the hand-computed
// and PyTorch reference tests.
inline std::vector<float> refParams() { return {1.0f, -2.0f, 0.5f}; }
inline std::vector<std::vector<float>> refGrads() {
  return {{0.5f, -1.0f, 2.0f}, {1.0f, 0.5f, -0.5f}, {-1.0f, 0.0f, 1.0f}};
}

inline OptimizerSection optimizerConfig(const char* type, double lr) {
  OptimizerSection cfg;
  cfg.type = type;
  cfg.lr = lr;
  cfg.momentum = 0.0;
  cfg.weight_decay = 0.0;
  return cfg;
}

// Applies one update per entry of `grads` over the whole buffer at cfg.lr and
// returns the parameters after each step.
inline std::vector<std::vector<float>> runSteps(const OptimizerSection& cfg, std::vector<float> params,
                                                const std::vector<std::vector<float>>& grads) {
  auto opt = makeOptimizer(cfg);
  const auto n = static_cast<int64_t>(params.size());
  opt->init(n);
  std::vector<std::vector<float>> after;
  for (size_t s = 0; s < grads.size(); ++s) {
    opt->update(params.data(), grads[s].data(), 0, n, StepInfo{cfg.lr, static_cast<int64_t>(s) + 1});
    after.push_back(params);
  }
  return after;
}

// Element-wise comparison; 1e-6 absolute-plus-relative covers float rounding
// over a few steps (and FMA contraction differences against PyTorch).
inline void checkNear(const std::vector<float>& got, const std::vector<double>& want, double eps = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(eps));
  }
}

}  // namespace dtrain::testing
