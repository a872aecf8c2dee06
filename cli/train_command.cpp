#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/distributed_run.h"
#include "cli/memory_check.h"
#include "cli/run_report.h"
#include "core/config/local_node.h"
#include "core/config/parse_job.h"
#include "core/config/validate_job.h"
#include "core/errors.h"
#include "core/train/checkpoint.h"
#include "core/train/progress.h"
#include "core/train/trainer.h"
#include "strategies/make_strategy.h"
#include "strategies/pipeline/pipeline_plan.h"

namespace dtrain::cli {

namespace fs = std::filesystem;

namespace {

// A new run must not silently destroy an earlier run's checkpoints.
void prepareRunDir(const std::string& run_dir, bool overwrite) {
  std::error_code ec;
  fs::path ckpts = fs::path(run_dir) / "checkpoints";
  bool has_checkpoints = !listCheckpoints(run_dir).empty();
  bool has_metrics = fs::exists(fs::path(run_dir) / "metrics.jsonl", ec);
  if (!has_checkpoints && !has_metrics) return;
  if (!overwrite)
    throw ConfigError("run directory " + run_dir + " already holds a run; continue it with `dtrain resume " +
                      run_dir + "`, start over with --overwrite, or choose another [job] run_dir");
  fs::remove_all(ckpts, ec);
  if (ec) throw IoError("cannot remove " + ckpts.string() + ": " + ec.message());
  fs::remove(fs::path(run_dir) / "metrics.jsonl", ec);
}

}  // namespace

int runTrain(const TrainArgs& args) {
  JobConfig job = parseJobFile(args.job_file, args.overrides);
  validateJob(job, startedByLauncher());
  TrainerOptions options;
  options.terminal = ProgressDisplay::isTerminal(stdout);
  options.quiet = args.quiet;
  options.fault_kill_at_step = args.fault_kill_at_step;
  options.fault_overflow_at_step = args.fault_overflow_at_step;
  // A worker started by a host's dtrain: the host has prepared the run directory.
  if (auto assignment = workerAssignmentFromEnv()) return runWorker(job, *assignment, nullptr, options);
  // Started by srun, mpirun or torchrun as one rank of the run.
  if (auto code =
          runUnderLauncher(job, nullptr, options, [&] { prepareRunDir(job.job.run_dir, args.overwrite); }))
    return *code;
  // A pipeline's stages, and every worker's memory, are checked before any process starts.
  if (job.strategy.type == "pipeline") pipeline::planPipelineJob(job, false);
  checkMemoryBeforeStart(job);
  if (isMultiProcess(job)) {
    // Only node 0 writes the run directory, so only it may prepare (and with
    // --overwrite empty) it: on a shared filesystem another host doing so would
    // delete node 0's run. A host told nothing finds its node first.
    int node = args.node;
    if (job.cluster.present && node < 0) node = findLocalNode(job.cluster);
    if (!job.cluster.present || node == 0) prepareRunDir(job.job.run_dir, args.overwrite);
    std::vector<std::string> command = {"train", args.job_file};
    for (const std::string& o : args.overrides) command.insert(command.end(), {"--set", o});
    return runHostProcesses(job, command, options, node);
  }
  prepareRunDir(job.job.run_dir, args.overwrite);
  options.strategy = makeStrategy(job.strategy, nullptr);
  Trainer trainer(job, options);
  return reportOutcome(trainer.run(nullptr), job.job.run_dir);
}

}  // namespace dtrain::cli
