
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
    return runHostProcesses(from.job, {"resume", args.run_dir}, options, args.node);
  }
  Trainer trainer(from.job, options);
  return reportOutcome(trainer.run(&from), from.job.job.run_dir);
}

}  // namespace dtrain::cli
