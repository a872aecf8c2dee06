#include "core/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.h"

namespace dtrain {

namespace {
constexpr double kPi = 3.14159265358979323846;
}

LrSchedule::LrSchedule(const ScheduleSection& cfg, double base_lr, int64_t total_steps)
    : kind_(Kind::Constant),
      base_lr_(base_lr),
      total_steps_(total_steps),
      warmup_(cfg.warmup_steps),
      step_every_(cfg.step_every),
      gamma_(cfg.gamma),
      min_lr_(cfg.min_lr) {
  if (cfg.type == "constant")
    kind_ = Kind::Constant;
  else if (cfg.type == "step")
    kind_ = Kind::Step;
  else if (cfg.type == "cosine")
    kind_ = Kind::Cosine;
  else
    throw ConfigError("unknown schedule type \"" + cfg.type + "\"; valid types: constant, step, cosine");
  if (warmup_ < 0) throw ConfigError("schedule.warmup_steps must be >= 0, got " + std::to_string(warmup_));
  if (kind_ == Kind::Step && step_every_ <= 0)
    throw ConfigError("schedule.step_every must be > 0 for the step schedule, got " +
                      std::to_string(step_every_));
}

double LrSchedule::at(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  if (step < warmup_) return base_lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  const int64_t t = step - warmup_;
  switch (kind_) {
    case Kind::Constant:
      return base_lr_;
    case Kind::Step:
      return base_lr_ * std::pow(gamma_, static_cast<double>(t / step_every_));
    case Kind::Cosine: {
      // T counts to the last update, not one past it, so that update gets min_lr.
      const int64_t T = total_steps_ - warmup_ - 1;
      if (T <= 0) return base_lr_;
      const double frac = static_cast<double>(std::min(t, T)) / static_cast<double>(T);
      return min_lr_ + (base_lr_ - min_lr_) * 0.5 * (1.0 + std::cos(kPi * frac));
    }
  }
  return base_lr_;
}

}  // namespace dtrain
