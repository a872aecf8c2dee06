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

// The run directory `path` names, from the text alone (the directory need not
// exist): the path itself, or for `RUN/checkpoints`, `RUN/checkpoints/latest`
// and `RUN/checkpoints/step-XXXXXXXX`, RUN. For a run directory or one of those
// it is the run_dir loadResumePoint gives, so a host that holds no checkpoint
// names the run as node 0 does.
std::string runDirOfPath(const std::string& path);

}  // namespace dtrain
