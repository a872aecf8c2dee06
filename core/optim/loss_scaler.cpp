#include "core/optim/loss_scaler.h"

#include <cmath>
#include <limits>

namespace dtrain {

namespace {
// Below this a scale would make fp16 gradients vanish anyway; above, an fp32
// gradient times the scale could overflow fp32 itself.
constexpr double kMinScale = 1.0 / (1 << 24);
constexpr double kMaxScale = 1e30;
}  // namespace

LossScaler::LossScaler(const JobConfig& job)
    : enabled_(job.job.precision == "fp16"),
      growth_interval_(job.train.loss_scale_growth_interval),
      backoff_(job.train.loss_scale_backoff),
      growth_(job.train.loss_scale_growth) {
  if (enabled_) state_.scale = job.train.loss_scale_initial;
}

void LossScaler::restore(const LossScaleState& state) {
  if (!enabled_) return;
  state_ = state;
}

float LossScaler::lossFactor(int64_t update) const {
  if (!enabled_) return 1.0f;
  if (update == overflow_at_) return std::numeric_limits<float>::infinity();
  return static_cast<float>(state_.scale);
}

bool LossScaler::settle(bool finite) {
  if (!enabled_) return true;
  if (!finite) {
    state_.scale = std::max(kMinScale, state_.scale * backoff_);
    state_.good_steps = 0;
    ++state_.skipped_steps;
    return false;
  }
  if (++state_.good_steps >= growth_interval_) {
    state_.scale = std::min(kMaxScale, state_.scale * growth_);
    state_.good_steps = 0;
  }
  return true;
}

}  // namespace dtrain
