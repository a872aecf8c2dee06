// dtrain resume: continue a run from its newest complete checkpoint, on the
// same workers or on others (core/config/resume_overrides.h says what may
// change). Who reads what:
//  - one process, or the host process of node 0: the checkpoint (its job, and
//    a clear error before any worker starts when there is none);
//  - a host other than node 0 given --job FILE: nothing in the run directory;
//    its job is FILE's, which node 0 has checked against the checkpoint's
//    (the run's job id, a digest of the job, must be the same on every host);
//  - a worker: the job its host hands over (--resolved-job). Only rank 0
//    reads the checkpoint; the others receive weights, optimizer state and
//    position by broadcast.
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/distributed_run.h"
#include "cli/memory_check.h"
#include "cli/run_report.h"
#include "core/config/job_to_toml.h"
#include "core/config/launch_env.h"
#include "core/config/local_node.h"
#include "core/config/parse_job.h"
#include "core/config/resume_overrides.h"
#include "core/config/validate_job.h"
#include "core/errors.h"
#include "core/train/progress.h"
#include "core/train/trainer.h"
#include "strategies/make_strategy.h"

namespace dtrain::cli {
namespace {

// The checkpoint's job with the changes of --job FILE and --set.
JobConfig changedJob(const JobConfig& saved, const ResumeArgs& args) {
  JobConfig job = args.job_file.empty() ? saved : withChangesFrom(saved, parseJobFile(args.job_file));
  applyResumeOverrides(job, args.overrides);
  return job;
}

// The job of a host that holds no checkpoint: FILE's, with --set, in the run
// directory RUN_DIR names (as node 0 names it, so the job ids agree).
JobConfig fileJob(const ResumeArgs& args) {
  JobConfig job = parseJobFile(args.job_file);
  job.job.run_dir = runDirOfPath(args.run_dir);
  applyResumeOverrides(job, args.overrides);
  return job;
}

void validateResumedJob(const JobConfig& job, const std::string& run_dir) {
  validateJob(job, startedByLauncher());
  if (isMultiProcess(job) && needsTokenAgain(job)) throw ConfigError(tokenAgainMessage(run_dir));
}

// This host's index among the job's [cluster] hosts: --node, else found by its addresses.
int nodeOf(const JobConfig& job, int node_option) {
  if (node_option >= 0) return node_option;
  if (!job.cluster.present || !isMultiProcess(job)) return 0;
  return findLocalNode(job.cluster);
}

int processesOf(const JobConfig& job) {
  if (!isMultiProcess(job)) return 1;
  if (!job.cluster.present) return trainingProcesses(job.strategy);
  int n = 0;
  for (const ClusterHost& h : job.cluster.hosts) n += h.slots;
  return n;
}

std::string executionOf(const JobConfig& job) {
  int n = processesOf(job), t = job.job.threads;
  return std::to_string(n) + (n == 1 ? " process" : " processes") + " x " +
         (t == 0 ? std::string("one thread per core")
                 : std::to_string(t) + (t == 1 ? " thread" : " threads"));
}

// The batches and steps are the same at any world size; the float sums are
// not, and a user comparing runs should know why the last digits differ.
void noteExecutionChange(const JobConfig& saved, const JobConfig& job, bool quiet) {
  if (quiet || (processesOf(saved) == processesOf(job) && saved.job.threads == job.job.threads)) return;
  std::printf(
      "dtrain: resuming on %s (the checkpoint was written on %s): the same global batches and steps, "
      "with sums added in another order, so results match an uninterrupted run up to float rounding\n",
      executionOf(job).c_str(), executionOf(saved).c_str());
  std::fflush(stdout);
}

// What this host's workers run: resume from `path` with the job handed over,
// so none of them derives it again (and only rank 0 opens the checkpoint).
std::vector<std::string> workerCommand(const std::string& path, const JobConfig& job) {
  return {"resume", path, "--resolved-job", jobToToml(job)};
}

// Ranks are numbered host by host from node 0 (rendezvous roster), so node
// 0's slot 0 is rank 0: known before joining, which is when the checkpoint
// has to be read.
bool isChiefSlot(const WorkerAssignment& a) { return a.node == 0 && a.slot == 0; }

int runResumeWorker(const ResumeArgs& args, const WorkerAssignment& assignment,
                    const TrainerOptions& options) {
  if (args.resolved_job.empty())
    throw ConfigError(
        "a resume worker takes its job from its host (--resolved-job); run `dtrain resume` without "
        "DTRAIN_WORKER_* variables in the environment");
  JobConfig job = parseJobString(args.resolved_job, "the job handed over by this host's dtrain");
  validateJob(job);
  std::optional<ResumePoint> from;
  if (isChiefSlot(assignment)) {
    // The host passes the checkpoint directory it checked: no fallback, the same state.
    std::vector<std::string> warnings;
    from = loadResumePoint(args.run_dir, &warnings);
    from->job = job;
  }
  return runWorker(job, assignment, from ? &*from : nullptr, options);
}

// A host other than node 0 with --job FILE: its workers get FILE's job and
// state from rank 0; the run directory need not exist here.
int runWithoutCheckpoint(const JobConfig& job, int node, const ResumeArgs& args,
                         const TrainerOptions& options) {
  validateResumedJob(job, args.run_dir);
  if (!isMultiProcess(job))
    throw ConfigError("--node " + std::to_string(node) + " is for multi-host runs, but " + args.job_file +
                      " resumes as strategy '" + job.strategy.type + "' on one host; drop --node");
  return runHostProcesses(job, workerCommand(args.run_dir, job), options, node);
}

ResumePoint loadForHost(const ResumeArgs& args) {
  try {
    return loadResumePointReporting(args.run_dir);
  } catch (const CheckpointError& e) {
    if (args.node <= 0 || !args.job_file.empty()) throw;
    throw CheckpointError(std::string(e.what()) + "; a host other than node 0 needs no checkpoint: give " +
                          "it the job with --job FILE");
  }
}

// Under a launcher (srun, mpirun, torchrun) this process is one rank: rank 0
// reads the checkpoint; the others need only the job (--job FILE), or read
// the job from the checkpoint when they can see it.
std::optional<int> resumeUnderLauncher(const ResumeArgs& args, const TrainerOptions& options) {
  std::optional<LaunchEnv> launch = detectLaunchEnv();
  if (!launch || launch->world_size <= 1 || startedAsWorker()) return std::nullopt;
  if (launch->rank != 0 && !args.job_file.empty()) {
    JobConfig job = fileJob(args);
    validateResumedJob(job, args.run_dir);
    return runUnderLauncher(job, nullptr, options);
  }
  ResumePoint from = loadResumePointReporting(args.run_dir);
  from.job = changedJob(from.job, args);
  validateResumedJob(from.job, args.run_dir);
  return runUnderLauncher(from.job, launch->rank == 0 ? &from : nullptr, options);
}

}  // namespace

int runResume(const ResumeArgs& args) {
  TrainerOptions options;
  options.terminal = ProgressDisplay::isTerminal(stdout);
  options.quiet = args.quiet;
  options.fault_kill_at_step = args.fault_kill_at_step;
  options.fault_overflow_at_step = args.fault_overflow_at_step;
  if (auto assignment = workerAssignmentFromEnv()) return runResumeWorker(args, *assignment, options);
  if (auto code = resumeUnderLauncher(args, options)) return *code;
  int node = args.node;  // -1: runHost finds it by address
  if (!args.job_file.empty()) {
    JobConfig job = fileJob(args);
    node = nodeOf(job, args.node);
    if (node > 0) return runWithoutCheckpoint(job, node, args, options);
  }

  ResumePoint from = loadForHost(args);
  const JobConfig saved = from.job;
  from.job = changedJob(saved, args);
  validateResumedJob(from.job, args.run_dir);
  noteExecutionChange(saved, from.job, args.quiet);
  checkMemoryBeforeStart(from.job);
  // The checkpoint directory, not RUN_DIR: rank 0 reads the one checked here.
  if (isMultiProcess(from.job))
    return runHostProcesses(from.job, workerCommand(from.checkpoint.dir, from.job), options, node);
  TrainerOptions alone = options;
  alone.strategy = makeStrategy(from.job.strategy, nullptr);
  Trainer trainer(from.job, alone);
  return reportOutcome(trainer.run(&from), from.job.job.run_dir);
}

}  // namespace dtrain::cli
