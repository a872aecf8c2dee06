#include "core/optim/sgd.h"

#include <doctest/doctest.h>

#include "core/errors.h"
#include "optim_test_util.h"

using namespace dtrain;
using namespace dtrain::testing;

// All cases start from p = {1, -2, 0.5} with g1 = {0.5, -1, 2}, g2 = {1, 0.5, -0.5},
// g3 = {-1, 0, 1} (optim_test_util.h), lr = 0.1.

TEST_CASE("sgd without momentum or weight decay: p -= lr * g") {
  auto after = runSteps(optimizerConfig("sgd", 0.1), refParams(), refGrads());
  // step 1: {1 - 0.05, -2 + 0.1, 0.5 - 0.2}
  checkNear(after[0], {0.95, -1.9, 0.3});
  // step 2: {0.95 - 0.1, -1.9 - 0.05, 0.3 + 0.05}
  checkNear(after[1], {0.85, -1.95, 0.35});
}

TEST_CASE("sgd with weight decay adds wd * p to the gradient") {
  OptimizerSection cfg = optimizerConfig("sgd", 0.1);
  cfg.weight_decay = 0.1;
  auto after = runSteps(cfg, refParams(), refGrads());
  // step 1: g' = g1 + 0.1 p = {0.5 + 0.1, -1 - 0.2, 2 + 0.05} = {0.6, -1.2, 2.05}
  checkNear(after[0], {1 - 0.06, -2 + 0.12, 0.5 - 0.205});
  // step 2: g' = g2 + 0.1 p = {1 + 0.094, 0.5 - 0.188, -0.5 + 0.0295} = {1.094, 0.312, -0.4705}
  checkNear(after[1], {0.94 - 0.1094, -1.88 - 0.0312, 0.295 + 0.04705});
}

TEST_CASE("sgd with momentum accumulates buf = momentum * buf + g") {
  OptimizerSection cfg = optimizerConfig("sgd", 0.1);
  cfg.momentum = 0.9;
  auto after = runSteps(cfg, refParams(), refGrads());
  // step 1: buf = g1 (PyTorch's first step), p -= 0.1 * buf
  checkNear(after[0], {0.95, -1.9, 0.3});
  // step 2: buf = 0.9 * g1 + g2 = {0.45 + 1, -0.9 + 0.5, 1.8 - 0.5} = {1.45, -0.4, 1.3}
  checkNear(after[1], {0.95 - 0.145, -1.9 + 0.04, 0.3 - 0.13});
  // step 3: buf = 0.9 * buf + g3 = {1.305 - 1, -0.36 + 0, 1.17 + 1} = {0.305, -0.36, 2.17}
  checkNear(after[2], {0.805 - 0.0305, -1.86 + 0.036, 0.17 - 0.217});
}

TEST_CASE("sgd with nesterov momentum steps along g + momentum * buf") {
  OptimizerSection cfg = optimizerConfig("sgd", 0.1);
  cfg.momentum = 0.9;
  cfg.nesterov = true;
  auto after = runSteps(cfg, refParams(), refGrads());
  // step 1: buf = g1; g1 + 0.9 buf = {0.95, -1.9, 3.8}
  checkNear(after[0], {1 - 0.095, -2 + 0.19, 0.5 - 0.38});
  // step 2: buf = {1.45, -0.4, 1.3}; g2 + 0.9 buf = {1 + 1.305, 0.5 - 0.36, -0.5 + 1.17}
  checkNear(after[1], {0.905 - 0.2305, -1.81 - 0.014, 0.12 - 0.067});
  // step 3: buf = {0.305, -0.36, 2.17}; g3 + 0.9 buf = {-1 + 0.2745, 0 - 0.324, 1 + 1.953}
  checkNear(after[2], {0.6745 + 0.07255, -1.824 + 0.0324, 0.053 - 0.2953});
}

TEST_CASE("sgd with momentum and weight decay") {
  OptimizerSection cfg = optimizerConfig("sgd", 0.1);
  cfg.momentum = 0.9;
  cfg.weight_decay = 0.1;
  auto after = runSteps(cfg, refParams(), refGrads());
  // step 1: buf = g' = {0.6, -1.2, 2.05}
  checkNear(after[0], {0.94, -1.88, 0.295});
  // step 2: g' = {1.094, 0.312, -0.4705};
  //         buf = 0.9 * {0.6, -1.2, 2.05} + g' = {0.54 + 1.094, -1.08 + 0.312, 1.845 - 0.4705}
  checkNear(after[1], {0.94 - 0.1634, -1.88 + 0.0768, 0.295 - 0.13745});
}

// Reference values produced once with PyTorch 1.13 (float32): torch.optim.SGD on
// p = torch.tensor([1., -2., .5]) with p.grad set to g1, g2, g3 before each step().
TEST_CASE("sgd matches PyTorch over three steps") {
  struct Case {
    double lr, momentum, weight_decay;
    bool nesterov;
    std::vector<std::vector<double>> want;
  };
  const std::vector<Case> cases = {
      {0.1,
       0.0,
       0.0,
       false,
       {{0.949999988, -1.89999998, 0.300000012},
        {0.849999964, -1.94999993, 0.350000024},
        {0.949999988, -1.94999993, 0.25000003}}},
      {0.1,
       0.0,
       0.1,
       false,
       {{0.939999998, -1.88, 0.294999987},
        {0.830600023, -1.91120005, 0.342049986},
        {0.922294021, -1.89208806, 0.23862949}}},
      {0.1,
       0.9,
       0.0,
       false,
       {{0.949999988, -1.89999998, 0.300000012},
        {0.805000007, -1.86000001, 0.170000017},
        {0.774500012, -1.824, -0.0469999947}}},
      {0.1,
       0.9,
       0.0,
       true,
       {{0.904999971, -1.80999994, 0.119999997},
        {0.674499989, -1.824, 0.0530000068},
        {0.747049987, -1.79159999, -0.242300004}}},
      {0.1,
       0.9,
       0.1,
       false,
       {{0.939999998, -1.88, 0.294999987},
        {0.776600003, -1.80320001, 0.157549992},
        {0.721773982, -1.716048, -0.0677305087}}},
      {0.05,
       0.8,
       0.01,
       true,
       {{0.954100013, -1.90820003, 0.319549978},
        {0.846921325, -1.91884267, 0.300102383},
        {0.890797794, -1.90639305, 0.174402043}}},
  };
  for (const Case& c : cases) {
    OptimizerSection cfg = optimizerConfig("sgd", c.lr);
    cfg.momentum = c.momentum;
    cfg.weight_decay = c.weight_decay;
    cfg.nesterov = c.nesterov;
    CAPTURE(c.lr);
    CAPTURE(c.momentum);
    CAPTURE(c.weight_decay);
    CAPTURE(c.nesterov);
    auto after = runSteps(cfg, refParams(), refGrads());
    for (size_t s = 0; s < after.size(); ++s) checkNear(after[s], c.want[s]);
  }
}

TEST_CASE("sgd state: a momentum buffer only when momentum is on") {
  OptimizerSection cfg = optimizerConfig("sgd", 0.1);
  Sgd plain(cfg);
  plain.init(5);
  CHECK(plain.stateBuffers().empty());

  cfg.momentum = 0.9;
  Sgd with_momentum(cfg);
  with_momentum.init(5);
  auto state = with_momentum.stateBuffers();
  REQUIRE(state.size() == 1);
  CHECK(state[0].first == "momentum");
  CHECK(state[0].second->shape() == Shape{5});
  for (int i = 0; i < 5; ++i) CHECK(state[0].second->data()[i] == 0.0f);
}

TEST_CASE("sgd rejects nesterov without momentum") {
  OptimizerSection cfg = optimizerConfig("sgd", 0.1);
  cfg.nesterov = true;
  CHECK_THROWS_AS(Sgd{cfg}, ConfigError);
}
