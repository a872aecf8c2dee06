// A GPU step recorded as a CUDA graph reads the optimizer's scalars from
// device memory, written by writeStepScalars: they must be exactly the
// scalars the update computes by value for the same lr and step.
#include <doctest/doctest.h>

#include <cstring>

#include "core/errors.h"
#include "core/optim/optimizer.h"
#include "core/optim/update_rules.h"

using namespace dtrain;

TEST_CASE("sgd writes its step scalars as the update computes them") {
  OptimizerSection cfg;
  cfg.type = "sgd";
  cfg.momentum = 0.9;
  cfg.weight_decay = 1e-4;
  const auto sgd = makeOptimizer(cfg);
  StepScalars out;
  sgd->writeStepScalars(StepInfo{0.037, 12}, out);
  const update_rules::SgdScalars want = update_rules::sgdScalars(0.037, 0.9, 1e-4);
  update_rules::SgdScalars got;
  std::memcpy(&got, out.optimizer, sizeof got);
  CHECK(got.lr == want.lr);
  CHECK(got.momentum == want.momentum);
  CHECK(got.weight_decay == want.weight_decay);
}

TEST_CASE("adam and adamw write their step's bias corrections") {
  for (const char* type : {"adam", "adamw"}) {
    OptimizerSection cfg;
    cfg.type = type;
    cfg.weight_decay = 0.01;
    const auto adam = makeOptimizer(cfg);
    const bool decoupled = std::string(type) == "adamw";
    for (int64_t step : {int64_t(1), int64_t(7), int64_t(1000)}) {
      StepScalars out;
      adam->writeStepScalars(StepInfo{0.002, step}, out);
      const update_rules::AdamScalars want =
          update_rules::adamScalars(0.002, cfg.beta1, cfg.beta2, cfg.eps, 0.01, decoupled, step);
      CHECK(std::memcmp(out.optimizer, &want, sizeof want) == 0);
    }
    StepScalars out;
    CHECK_THROWS_AS(adam->writeStepScalars(StepInfo{0.002, 0}, out), Error);
  }
}
