// The human-readable part of a checkpoint, state.toml: a [state] table (where
// training stands) followed by the resolved job it belongs to, so that
// `dtrain resume` and `dtrain eval` need nothing but the checkpoint.
//
// There is no hidden RNG state to save: the sample order derives from
// (seed, epoch) and dropout masks from (seed, step, sample), so step, epoch
// and position are enough to continue bit for bit.
#pragma once
#include <cstdint>
#include <string>

#include "core/config/job_config.h"

namespace dtrain {

struct TrainState {
  int64_t step = 0;      // optimizer updates done
  int64_t epoch = 0;     // the epoch in progress (0-based)
  int64_t position = 0;  // samples of that epoch's order already trained on
  double best_test_accuracy = -1;
  // fp16 runs: the loss scaler's state (core/optim/loss_scaler.h); a scale
  // of 0: none saved (another precision), a resume in fp16 starts afresh.
  double loss_scale = 0;
  int64_t loss_scale_good_steps = 0;
  int64_t skipped_steps = 0;
};

std::string trainStateToToml(const TrainState& state, const JobConfig& job);
// `origin` names the file in error messages.
void trainStateFromToml(const std::string& text, const std::string& origin, TrainState* state,
                        JobConfig* job);

}  // namespace dtrain
