// train and resume for the multi-process strategies (mirrored,
// multi_worker_mirrored): the host side starts and watches this host's
// workers; a worker (started with its assignment in the environment) joins
// the run and trains as one rank.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/config/job_config.h"
#include "core/launch/worker_env.h"
#include "core/train/resume_point.h"
#include "core/train/trainer.h"

namespace dtrain::cli {

// True when the job runs as several processes.
bool isMultiProcess(const JobConfig& job);

// Starts this host's workers, each running `dtrain <command>` with the
// options that reach the workers (quiet, fault injection) appended; returns
// the exit code.
int runHostProcesses(const JobConfig& job, std::vector<std::string> command, const TrainerOptions& options,
                     int node);

// Trains as one rank of the run; `resume` is the checkpoint (read by the
// chief; may be null on other ranks). Returns the exit code.
int runWorker(const JobConfig& job, const WorkerAssignment& assignment, const ResumePoint* resume,
              TrainerOptions options);

}  // namespace dtrain::cli
