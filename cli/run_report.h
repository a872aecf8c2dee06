// Console output shared by train and resume: the closing lines of a run.
#pragma once
#include <string>

#include "core/train/trainer.h"

namespace dtrain::cli {

// Prints how the run ended and returns the exit code (128 + signal when interrupted).
int reportOutcome(const TrainOutcome& outcome, const std::string& run_dir);

}  // namespace dtrain::cli
