#include "cli/distributed_run.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <utility>

#include "cli/commands.h"
#include "cli/run_report.h"
#include "core/errors.h"
#include "core/launch/host_run.h"
#include "core/launch/worker_session.h"

namespace dtrain::cli {
namespace {

std::string selfExecutable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw IoError("cannot find this program's path (/proc/self/exe) to start the workers");
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

bool isMultiProcess(const JobConfig& job) { return job.strategy.type != "one_device"; }

int runHostProcesses(const JobConfig& job, std::vector<std::string> command, const TrainerOptions& options,
                     int node) {
  if (options.quiet) command.push_back("-q");
  if (options.fault_kill_at_step > 0)
    command.insert(command.end(), {"--fault-kill-at-step", std::to_string(options.fault_kill_at_step)});
  HostRunOptions o;
  o.program = selfExecutable();
  o.worker_args = std::move(command);
  o.node = node;
  return runHost(job, o);
}

int runWorker(const JobConfig& configured, const WorkerAssignment& assignment, const ResumePoint* resume,
              TrainerOptions options) {
  JobConfig job = configured;
  // threads = 0 means "the cores": shared by this host's workers.
  if (job.job.threads == 0) job.job.threads = std::max(1, resolveThreads(0) / assignment.local_workers);
  WorkerSession session(job, assignment);
  options.strategy = session.strategy();
  try {
    Trainer trainer(job, options);
    TrainOutcome outcome = trainer.run(session.rank() == 0 ? resume : nullptr);
    session.leave();
    if (session.rank() != 0) return outcome.interrupted ? 128 + outcome.stop_signal : kExitOk;
    return reportOutcome(outcome, job.job.run_dir);
  } catch (const std::exception& e) {
    // The others would otherwise wait for this rank until a deadline.
    std::string what = "rank " + std::to_string(session.rank()) + ": " + e.what();
    session.abort(what);
    if (dynamic_cast<const ConfigError*>(&e)) throw ConfigError(what);
    throw Error(what);
  }
}

}  // namespace dtrain::cli
