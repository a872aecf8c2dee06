#include "core/optim/adam.h"

#include <doctest/doctest.h>

#include <cmath>

#include "core/errors.h"
#include "optim_test_util.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// One Adam step for one element from hand-computed moments m, v and the bias
// corrections bc1 = 1 - beta1^t, bc2 = 1 - beta2^t.
double adamStep(double p, double m, double v, double bc1, double bc2, double lr = 0.1, double eps = 1e-8) {
  return p - lr * (m / bc1) / (std::sqrt(v / bc2) + eps);
}

}  // namespace

// All cases start from p = {1, -2, 0.5} with g1 = {0.5, -1, 2}, g2 = {1, 0.5, -0.5},
// g3 = {-1, 0, 1} (optim_test_util.h), lr = 0.1, betas (0.9, 0.999), eps 1e-8.

TEST_CASE("adam without weight decay") {
  auto after = runSteps(optimizerConfig("adam", 0.1), refParams(), refGrads());
  // step 1: m = 0.1 g1, v = 0.001 g1^2, so m_hat = g1, v_hat = g1^2 and every
  // parameter moves by lr = 0.1 against the sign of its gradient.
  checkNear(after[0], {0.9, -1.9, 0.4});
  // step 2: bc1 = 1 - 0.9^2 = 0.19, bc2 = 1 - 0.999^2 = 0.001999
  //   m = 0.9 m + 0.1 g2 = {0.045 + 0.1, -0.09 + 0.05, 0.18 - 0.05}
  //   v = 0.999 v + 0.001 g2^2 = {0.00024975 + 0.001, 0.000999 + 0.00025, 0.003996 + 0.00025}
  const double p2[3] = {adamStep(0.9, 0.145, 0.00124975, 0.19, 0.001999),
                        adamStep(-1.9, -0.04, 0.001249, 0.19, 0.001999),
                        adamStep(0.4, 0.13, 0.004246, 0.19, 0.001999)};
  checkNear(after[1], {p2[0], p2[1], p2[2]});
  // step 3: bc1 = 1 - 0.9^3 = 0.271, bc2 = 1 - 0.999^3 = 0.002997001
  //   m = 0.9 m + 0.1 g3 = {0.1305 - 0.1, -0.036 + 0, 0.117 + 0.1}
  //   v = 0.999 v + 0.001 g3^2 = {0.00124850025 + 0.001, 0.001247751 + 0, 0.004241754 + 0.001}
  checkNear(after[2], {adamStep(p2[0], 0.0305, 0.00224850025, 0.271, 0.002997001),
                       adamStep(p2[1], -0.036, 0.001247751, 0.271, 0.002997001),
                       adamStep(p2[2], 0.217, 0.005241754, 0.271, 0.002997001)});
}

TEST_CASE("adam adds L2 weight decay to the gradient") {
  OptimizerSection cfg = optimizerConfig("adam", 0.1);
  cfg.weight_decay = 0.1;
  auto after = runSteps(cfg, refParams(), refGrads());
  // step 1: g' = g1 + 0.1 p = {0.6, -1.2, 2.05}: same signs, so the same first step.
  checkNear(after[0], {0.9, -1.9, 0.4});
  // step 2: g' = g2 + 0.1 {0.9, -1.9, 0.4} = {1.09, 0.31, -0.46}
  //   m = 0.9 {0.06, -0.12, 0.205} + 0.1 g' = {0.054 + 0.109, -0.108 + 0.031, 0.1845 - 0.046}
  //   v = 0.999 {0.00036, 0.00144, 0.0042025} + 0.001 g'^2
  //     = {0.00035964 + 0.0011881, 0.00143856 + 0.0000961, 0.0041982975 + 0.0002116}
  checkNear(after[1], {adamStep(0.9, 0.163, 0.00154774, 0.19, 0.001999),
                       adamStep(-1.9, -0.077, 0.00153466, 0.19, 0.001999),
                       adamStep(0.4, 0.1385, 0.0044098975, 0.19, 0.001999)});
}

TEST_CASE("adamw decays the parameters before the Adam step") {
  OptimizerSection cfg = optimizerConfig("adamw", 0.1);
  cfg.weight_decay = 0.1;
  auto after = runSteps(cfg, refParams(), refGrads());
  // step 1: p *= 1 - 0.1 * 0.1 = 0.99 -> {0.99, -1.98, 0.495}, then the plain Adam step of +-0.1
  checkNear(after[0], {0.89, -1.88, 0.395});
  // step 2: p *= 0.99 -> {0.8811, -1.8612, 0.39105}; moments as plain Adam (the decay is
  // not part of the gradient)
  checkNear(after[1], {adamStep(0.8811, 0.145, 0.00124975, 0.19, 0.001999),
                       adamStep(-1.8612, -0.04, 0.001249, 0.19, 0.001999),
                       adamStep(0.39105, 0.13, 0.004246, 0.19, 0.001999)});
}

// Reference values produced once with PyTorch 1.13 (float32): torch.optim.Adam /
// AdamW on p = torch.tensor([1., -2., .5]) with p.grad set to g1, g2, g3 before
// each step().
TEST_CASE("adam and adamw match PyTorch over three steps") {
  struct Case {
    const char* type;
    double lr, beta1, beta2, eps, weight_decay;
    std::vector<std::vector<double>> want;
  };
  const std::vector<Case> cases = {
      {"adam",
       0.1,
       0.9,
       0.999,
       1e-8,
       0.0,
       {{0.900000036, -1.89999998, 0.400000006},
        {0.803481817, -1.87336624, 0.353053182},
        {0.790488303, -1.85277832, 0.292505771}}},
      {"adam",
       0.1,
       0.9,
       0.999,
       1e-8,
       0.1,
       {{0.900000036, -1.89999998, 0.400000006},
        {0.80250299, -1.85374725, 0.350921839},
        {0.779899895, -1.80892932, 0.288642406}}},
      {"adamw",
       0.1,
       0.9,
       0.999,
       1e-8,
       0.1,
       {{0.890000045, -1.88, 0.395000011},
        {0.78458184, -1.83456624, 0.344103187},
        {0.763742507, -1.79563272, 0.28011474}}},
      {"adam",
       0.01,
       0.8,
       0.99,
       1e-3,
       0.05,
       {{0.990018129, -1.99000907, 0.490004927},
        {0.980167389, -1.98678863, 0.485675186},
        {0.979045987, -1.98386216, 0.479723573}}},
      {"adamw",
       0.01,
       0.8,
       0.99,
       1e-3,
       0.05,
       {{0.989519954, -1.98900998, 0.489754975},
        {0.979214191, -1.98590672, 0.485311449},
        {0.978158236, -1.98338616, 0.479232073}}},
  };
  for (const Case& c : cases) {
    OptimizerSection cfg = optimizerConfig(c.type, c.lr);
    cfg.beta1 = c.beta1;
    cfg.beta2 = c.beta2;
    cfg.eps = c.eps;
    cfg.weight_decay = c.weight_decay;
    CAPTURE(c.type);
    CAPTURE(c.lr);
    CAPTURE(c.weight_decay);
    auto after = runSteps(cfg, refParams(), refGrads());
    for (size_t s = 0; s < after.size(); ++s) checkNear(after[s], c.want[s]);
  }
}

TEST_CASE("adam state: adam_m and adam_v, n zeros each") {
  for (bool decoupled : {false, true}) {
    Adam opt(optimizerConfig("adam", 0.1), decoupled);
    CHECK(opt.name() == (decoupled ? "adamw" : "adam"));
    opt.init(7);
    auto state = opt.stateBuffers();
    REQUIRE(state.size() == 2);
    CHECK(state[0].first == "adam_m");
    CHECK(state[1].first == "adam_v");
    for (auto& [name, t] : state) {
      CAPTURE(name);
      CHECK(t->shape() == Shape{7});
      for (int i = 0; i < 7; ++i) CHECK(t->data()[i] == 0.0f);
    }
  }
}

TEST_CASE("adam rejects step 0") {
  Adam opt(optimizerConfig("adam", 0.1), false);
  opt.init(3);
  std::vector<float> p = refParams();
  std::vector<float> g = refGrads()[0];
  CHECK_THROWS_AS(opt.update(p.data(), g.data(), 0, 3, StepInfo{0.1, 0}), Error);
}
