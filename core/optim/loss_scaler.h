// Dynamic loss scaling, for precision = "fp16" (as PyTorch's GradScaler and
// Keras's LossScaleOptimizer do). fp16's smallest values are 2^-24, so small
// activation gradients would round to zero: the loss gradient is multiplied
// by the scale before backward, and the summed parameter gradients are
// divided by it again before clipping and the update. A step whose gradients
// hold an inf or a NaN (the scale was too large) is skipped: no update, the
// scale multiplied by the backoff. After growth_interval finite steps in a
// row the scale grows again.
//
// Every worker holds the same scaler: each step's decision is taken from
// gradients every worker sees (the all-reduced sum, or a flag the workers
// agree on), and the state travels with the chief's at start-up and in every
// checkpoint. Not thread-safe: the trainer's thread.
#pragma once
#include <cstdint>

#include "core/config/job_config.h"

namespace dtrain {

struct LossScaleState {
  double scale = 1;
  int64_t good_steps = 0;     // finite steps in a row since the scale last changed
  int64_t skipped_steps = 0;  // steps skipped over the run
};

class LossScaler {
 public:
  // Off: scale 1, every step goes ahead, nothing is checked.
  LossScaler() = default;
  // On for precision "fp16", from [train] loss_scale_*; off otherwise.
  explicit LossScaler(const JobConfig& job);

  bool enabled() const { return enabled_; }
  double scale() const { return state_.scale; }
  const LossScaleState& state() const { return state_; }
  // A checkpoint's state, or the chief's (ignored when off).
  void restore(const LossScaleState& state);

  // What the loss gradient of update `update` (1-based) is multiplied by:
  // the scale, or an infinity on the update overflowAt named.
  float lossFactor(int64_t update) const;
  // The factor that brings the summed gradients back: 1 / scale.
  float unscaleFactor() const { return static_cast<float>(1.0 / state_.scale); }
  // After a step's complete gradients were checked: whether they were all
  // finite. Returns whether the update goes ahead (always when off).
  bool settle(bool finite);

  // Tests: update `update`'s loss gradient is multiplied by infinity (on
  // this worker alone), as an overflow would leave it.
  void overflowAt(int64_t update) { overflow_at_ = update; }

 private:
  bool enabled_ = false;
  LossScaleState state_;
  int64_t growth_interval_ = 2000;
  double backoff_ = 0.5, growth_ = 2.0;
  int64_t overflow_at_ = 0;
};

}  // namespace dtrain
