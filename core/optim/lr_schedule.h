// The learning rate as a function of the update index: an optional linear
// warm-up followed by a constant, step or cosine schedule ([schedule]).
//
//   step < warmup:  lr * (step + 1) / warmup            (reaches lr at step warmup-1)
//   constant:       lr
//   step:           lr * gamma^floor((step - warmup) / step_every)
//   cosine:         min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * t / T))
//                   t = step - warmup, T = total_steps - warmup - 1, so the last
//                   update (step = total_steps - 1) uses exactly min_lr; later
//                   steps stay at min_lr; T <= 0 (nothing to decay over) gives lr.
//
// Immutable after construction, so at() may be called from any thread.
#pragma once
#include <cstdint>

#include "core/config/job_config.h"

namespace dtrain {

class LrSchedule {
 public:
  // total_steps: the number of updates in the whole run (used by cosine).
  // Throws ConfigError for an unknown type (listing the valid ones), a negative
  // warm-up, or step_every <= 0 for the step schedule.
  LrSchedule(const ScheduleSection& cfg, double base_lr, int64_t total_steps);

  // Learning rate for the update with 0-based index `step` (the one about to happen).
  double at(int64_t step) const;

 private:
  enum class Kind { Constant, Step, Cosine };
  Kind kind_;
  double base_lr_;
  int64_t total_steps_;
  int64_t warmup_;
  int64_t step_every_;
  double gamma_;
  double min_lr_;
};

}  // namespace dtrain
