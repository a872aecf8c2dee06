
#include "cli/commands.h"
#include "cli/distributed_run.h"
#include "cli/run_report.h"
#include "core/train/progress.h"
#include "core/train/trainer.h"

namespace dtrain::cli {

int runResume(const ResumeArgs& args) {
  ResumePoint from = loadResumePointReporting(args.run_dir);
  TrainerOptions options;
  options.terminal = ProgressDisplay::isTerminal(stdout);
  options.quiet = args.quiet;
  options.fault_kill_at_step = args.fault_kill_at_step;
  if (auto assignment = workerAssignmentFromEnv()) return runWorker(from.job, *assignment, &from, options);
  if (isMultiProcess(from.job)) {
    std::vector<std::string> worker_args = {"resume", args.run_dir};
    if (args.quiet) worker_args.push_back("-q");
    if (args.fault_kill_at_step > 0)
      worker_args.insert(worker_args.end(), {"--fault-kill-at-step", std::to_string(args.fault_kill_at_step)});
    return runHostProcesses(from.job, worker_args, args.node);
  }
  Trainer trainer(from.job, options);
  return reportOutcome(trainer.run(&from), from.job.job.run_dir);
}

}  // namespace dtrain::cli
