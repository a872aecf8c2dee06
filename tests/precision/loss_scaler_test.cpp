// fp16's dynamic loss scale: growth after a run of finite steps, backoff and
// a skip on an overflow, and nothing at all in other precisions.
#include <doctest/doctest.h>

#include <cmath>

#include "core/optim/loss_scaler.h"

namespace dtrain {
namespace {

JobConfig fp16Job() {
  JobConfig job;
  job.job.precision = "fp16";
  job.train.loss_scale_initial = 1024;
  job.train.loss_scale_growth_interval = 3;
  job.train.loss_scale_backoff = 0.25;
  job.train.loss_scale_growth = 4;
  return job;
}

TEST_CASE("the loss scale grows after growth_interval finite steps and backs off on an overflow") {
  LossScaler s(fp16Job());
  REQUIRE(s.enabled());
  CHECK(s.lossFactor(1) == 1024.0f);
  CHECK(s.unscaleFactor() == 1.0f / 1024);
  CHECK(s.settle(true));
  CHECK(s.settle(true));
  CHECK(s.scale() == 1024);
  CHECK(s.settle(true));  // the third in a row: x4
  CHECK(s.scale() == 4096);
  CHECK(s.state().good_steps == 0);
  CHECK(s.settle(true));
  CHECK_FALSE(s.settle(false));  // skipped: x0.25, the run of finite steps starts again
  CHECK(s.scale() == 1024);
  CHECK(s.state().good_steps == 0);
  CHECK(s.state().skipped_steps == 1);
  CHECK(s.settle(true));
  CHECK(s.settle(true));
  CHECK(s.scale() == 1024);
}

TEST_CASE("the overflow hook scales one update's loss gradient by infinity, and restore takes a state") {
  LossScaler s(fp16Job());
  s.overflowAt(5);
  CHECK(s.lossFactor(4) == 1024.0f);
  CHECK(std::isinf(s.lossFactor(5)));
  s.restore({64, 2, 7});
  CHECK(s.scale() == 64);
  CHECK(s.state().good_steps == 2);
  CHECK(s.state().skipped_steps == 7);
  CHECK(s.settle(true));
  CHECK(s.scale() == 256);
}

TEST_CASE("other precisions scale nothing and skip nothing") {
  for (const char* p : {"fp32", "tf32", "bf16"}) {
    JobConfig job = fp16Job();
    job.job.precision = p;
    LossScaler s(job);
    CHECK_FALSE(s.enabled());
    CHECK(s.lossFactor(1) == 1.0f);
    CHECK(s.settle(false));
    s.restore({64, 2, 7});
    CHECK(s.scale() == 1);
  }
}

}  // namespace
}  // namespace dtrain
