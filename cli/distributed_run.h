// train and resume for the multi-process strategies (mirrored,
// multi_worker_mirrored): the host side starts and watches this host's
// workers; a worker (started with its assignment in the environment) joins
// the run and trains as one rank.
#pragma once
#include <functional>
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

// What a caller adds to a worker's run; each may be empty.
struct WorkerHooks {
  // Runs on rank 0 once the group has formed, before training: a failure
  // there stops every rank at once.
  std::function<void()> prepare_on_rank0;
  // Runs just before the process exits on an abort notice (WorkerSession).
  std::function<void()> before_abort_exit;
};

// Trains as one rank of the run; `resume` is the checkpoint (read by the
// chief; may be null on other ranks). Returns the exit code.
int runWorker(const JobConfig& job, const WorkerAssignment& assignment, const ResumePoint* resume,
              TrainerOptions options, const WorkerHooks& hooks = {});

// Whether srun, mpirun or torchrun started this process as one of several
// ranks (and not a host's dtrain as its worker): the launcher then gives the
// ranks, the coordinator and the run token, which the job may leave out.
bool startedByLauncher();

// train and resume under a launcher (srun, mpirun, torchrun; see
// core/launch/launcher_run.h): when this process was started by one with a
// world size above 1 (and not by a host's dtrain), it trains as the
// launcher's rank of the run and returns the exit code; launcher rank 0 also
// serves the rendezvous. nullopt when there is no such launcher: the caller
// runs as it would without one (a world size of 1 changes nothing).
// `prepare_on_rank0` as for runWorker (train: prepare the run directory).
// Throws ConfigError for a malformed launcher variable or a job that cannot
// run as several processes, CommError when the coordinator's port is taken.
std::optional<int> runUnderLauncher(const JobConfig& job, const ResumePoint* resume, TrainerOptions options,
                                    const std::function<void()>& prepare_on_rank0 = {});

}  // namespace dtrain::cli
