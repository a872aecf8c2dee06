#include "core/optim/lr_schedule.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/errors.h"

using namespace dtrain;

namespace {
constexpr double kPi = 3.14159265358979323846;

ScheduleSection schedule(const char* type, int64_t warmup = 0) {
  ScheduleSection s;
  s.type = type;
  s.warmup_steps = warmup;
  return s;
}
}  // namespace

TEST_CASE("constant schedule") {
  LrSchedule lr(schedule("constant"), 0.1, 1000);
  CHECK(lr.at(0) == doctest::Approx(0.1));
  CHECK(lr.at(999) == doctest::Approx(0.1));
  CHECK(lr.at(5000) == doctest::Approx(0.1));
}

TEST_CASE("linear warm-up reaches the base rate at its last step") {
  LrSchedule lr(schedule("constant", 4), 0.1, 1000);
  CHECK(lr.at(0) == doctest::Approx(0.1 * 1 / 4));
  CHECK(lr.at(1) == doctest::Approx(0.1 * 2 / 4));
  CHECK(lr.at(3) == doctest::Approx(0.1));  // last warm-up step: (3 + 1) / 4
  CHECK(lr.at(4) == doctest::Approx(0.1));  // first scheduled step
}

TEST_CASE("step schedule multiplies by gamma every step_every steps after warm-up") {
  ScheduleSection s = schedule("step", 10);
  s.step_every = 100;
  s.gamma = 0.5;
  LrSchedule lr(s, 0.8, 1000);
  CHECK(lr.at(9) == doctest::Approx(0.8));    // warm-up end
  CHECK(lr.at(10) == doctest::Approx(0.8));   // t = 0
  CHECK(lr.at(109) == doctest::Approx(0.8));  // t = 99
  CHECK(lr.at(110) == doctest::Approx(0.4));  // t = 100: first decay
  CHECK(lr.at(209) == doctest::Approx(0.4));
  CHECK(lr.at(210) == doctest::Approx(0.2));  // t = 200
  CHECK(lr.at(310) == doctest::Approx(0.1));  // t = 300
}

TEST_CASE("cosine schedule: base rate first, min_lr at the last step, halfway between at the midpoint") {
  ScheduleSection s = schedule("cosine", 10);
  s.min_lr = 0.01;
  // 111 steps: warm-up 0..9, cosine over t = 0..100 (steps 10..110).
  LrSchedule lr(s, 0.1, 111);
  CHECK(lr.at(4) == doctest::Approx(0.1 * 5 / 10));
  CHECK(lr.at(10) == doctest::Approx(0.1));                // cos(0) = 1
  CHECK(lr.at(60) == doctest::Approx(0.01 + 0.09 * 0.5));  // t = 50 of 100: cos(pi/2) = 0
  CHECK(lr.at(35) == doctest::Approx(0.01 + 0.09 * 0.5 * (1 + std::cos(kPi / 4))));  // t = 25
  CHECK(lr.at(110) == doctest::Approx(0.01));  // last step: cos(pi) = -1
  CHECK(lr.at(500) == doctest::Approx(0.01));  // past the end it stays at the floor
  // monotone decay
  for (int64_t t = 10; t < 110; ++t) CHECK(lr.at(t + 1) <= lr.at(t));
}

TEST_CASE("cosine schedule with no steps to decay over keeps the base rate") {
  ScheduleSection s = schedule("cosine", 5);
  s.min_lr = 0.0;
  CHECK(LrSchedule(s, 0.1, 6).at(5) == doctest::Approx(0.1));  // one step after warm-up
  CHECK(LrSchedule(s, 0.1, 3).at(5) == doctest::Approx(0.1));  // total shorter than warm-up
  CHECK(LrSchedule(schedule("cosine"), 0.1, 0).at(0) == doctest::Approx(0.1));
  CHECK(std::isfinite(LrSchedule(schedule("cosine"), 0.1, 1).at(0)));
}

TEST_CASE("schedule configuration errors") {
  try {
    LrSchedule(schedule("linear"), 0.1, 10);
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("constant, step, cosine") != std::string::npos);
  }
  CHECK_THROWS_AS(LrSchedule(schedule("constant", -1), 0.1, 10), ConfigError);
  ScheduleSection s = schedule("step");
  s.step_every = 0;
  CHECK_THROWS_AS(LrSchedule(s, 0.1, 10), ConfigError);
}
