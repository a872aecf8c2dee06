// Where a run continues from: the newest complete checkpoint at a path, with
// its training state and the resolved job recorded in it.
#pragma once
#include <string>
#include <vector>

#include "core/config/job_config.h"
#include "core/train/checkpoint.h"
#include "core/train/train_state.h"

namespace dtrain {

struct ResumePoint {
  LoadedCheckpoint checkpoint;
  TrainState state;
  JobConfig job;  // run_dir set to the directory the checkpoint lives in
};

// `path`: a checkpoint directory, a `latest` link or a run directory (see
// loadLatestCheckpoint). Checkpoints skipped as corrupt are described in *warnings.
ResumePoint loadResumePoint(const std::string& path, std::vector<std::string>* warnings);

}  // namespace dtrain
