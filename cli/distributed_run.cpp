#include "cli/distributed_run.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

#include "cli/commands.h"
#include "cli/run_report.h"
#include "core/config/launch_env.h"
#include "core/config/tf_config_plan.h"
#include "core/errors.h"
#include "core/launch/host_run.h"
#include "core/launch/launcher_run.h"
#include "core/launch/worker_session.h"
#include "core/util/seconds.h"
#include "strategies/make_strategy.h"
#include "strategies/parameter_server/shard_process.h"

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
  if (options.fault_overflow_at_step > 0)
    command.insert(command.end(),
                   {"--fault-overflow-at-step", std::to_string(options.fault_overflow_at_step)});
  HostRunOptions o;
  o.program = selfExecutable();
  o.worker_args = std::move(command);
  o.node = node;
  return runHost(job, o);
}

int runWorker(const JobConfig& configured, const WorkerAssignment& assignment, const ResumePoint* resume,
              TrainerOptions options, const WorkerHooks& hooks) {
  JobConfig job = configured;
  // threads = 0 means "the cores": shared by this host's workers.
  if (job.job.threads == 0) job.job.threads = std::max(1, resolveThreads(0) / assignment.local_workers);
  // So are the decoding threads of file datasets (each worker decodes its slice of every batch).
  if (job.data.loader_threads == 0 && job.data.dataset == "image_folder")
    job.data.loader_threads = std::max(1, resolveThreads(0) / assignment.local_workers);
  WorkerSession session(job, assignment, hooks.before_abort_exit);
  if (session.shard() >= 0) {  // a parameter-server shard: serves the workers, trains nothing
    try {
      // Workers on other hosts reach it over TCP at this host's address; on
      // one host through a Unix socket.
      const bool one_host = !job.cluster.present || assignment.all_ranks_on_this_host;
      const std::string summary = runShardProcess(job, session, one_host ? "" : assignment.address);
      if (!options.quiet) std::printf("%s\n", summary.c_str());
      session.leave();
      return kExitOk;
    } catch (const std::exception& e) {
      const std::string what = "parameter-server shard " + std::to_string(session.shard()) + ": " + e.what();
      session.abort(what);
      throw Error(what);
    }
  }
  options.strategy = makeStrategy(job, session);
  options.local_index = assignment.localIndex();
  if (session.elastic()) {
    options.regroup = [&job, &session] {
      const WorkerSession::Regrouped r = session.regroup();
      TrainerOptions::Regrouped out;
      out.strategy = makeStrategy(job, session);
      out.generation = session.generation();
      out.change = r.change;
      out.stop = r.stop;
      return out;
    };
    options.replacements_waiting = [&session] { return session.replacementsWaiting(); };
  }
  try {
    if (session.rank() == 0 && hooks.prepare_on_rank0) hooks.prepare_on_rank0();
    Trainer trainer(job, options);
    options.strategy.reset();  // the trainer's is the only one: a regroup drops it with its group
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

namespace {

// TF_CONFIG (when the job takes its cluster from it) as a launcher: the
// orchestrator that set it started one process per task. Only the tasks that
// train are started so; the job's strategy and [cluster] become TF_CONFIG's.
std::optional<LaunchEnv> launchFromTfConfig(const JobConfig& job, JobConfig& planned) {
  std::optional<TfConfig> tf =
      jobTfConfig(job, [](const char* name) -> const char* { return std::getenv(name); });
  if (!tf) return std::nullopt;
  const TfClusterPlan plan = tfClusterPlan(*tf, job);
  if (!plan.self)
    throw ConfigError("TF_CONFIG: this process is task " + tf->keyOf(tf->task_type) + " " +
                      std::to_string(tf->task_index) +
                      ", which trains nothing: dtrain starts only chief, worker and "
                      "ps tasks (its chief evaluates; `dtrain eval` evaluates a checkpoint)");
  planned = job;
  planned.strategy.type = plan.strategy_type;
  // A parameter-server job: the chief and workers train, the ps tasks are the shards.
  const int shards = static_cast<int>(plan.ps_shards.size());
  planned.strategy.workers = plan.self->world_size - shards;
  if (shards > 0) planned.strategy.ps = shards;
  planned.cluster = plan.cluster;
  return plan.self;
}

}  // namespace

bool startedByLauncher() {
  if (startedAsWorker()) return false;
  const std::optional<LaunchEnv> env = detectLaunchEnv();
  return env && env->world_size > 1;
}

std::optional<int> runUnderLauncher(const JobConfig& configured, const ResumePoint* resume,
                                    TrainerOptions options, const std::function<void()>& prepare_on_rank0) {
  // A worker of a host's dtrain inherits the launcher's variables of its host
  // process; its own assignment says who it is.
  if (startedAsWorker()) return std::nullopt;
  std::optional<LaunchEnv> env = detectLaunchEnv();
  JobConfig from_tf_config;
  bool from_tf = false;
  if (!env) {
    env = launchFromTfConfig(configured, from_tf_config);
    from_tf = env.has_value();
  }
  const JobConfig& job = from_tf ? from_tf_config : configured;
  if (!env || env->world_size == 1) return std::nullopt;
  LauncherRun run = planLauncherRun(job, *env);
  std::unique_ptr<LauncherCoordinator> coordinator;
  if (env->rank == 0) {
    if (!options.quiet)
      for (const std::string& note : run.notes) std::printf("%s\n", note.c_str());
    std::fflush(stdout);
    coordinator = std::make_unique<LauncherCoordinator>(job, run);
  }
  WorkerHooks hooks;
  hooks.prepare_on_rank0 = prepare_on_rank0;
  if (coordinator) hooks.before_abort_exit = [c = coordinator.get()] { c->lingerAfterFailure(); };
  int code = kExitFailure;
  try {
    code = runWorker(job, run.assignment, resume, options, hooks);
  } catch (...) {
    if (coordinator) coordinator->lingerAfterFailure();
    throw;
  }
  if (!coordinator) return code;
  // The others still need the coordinator to leave; a rank lost meanwhile is a failed run.
  auto within = secondsToMillis(job.cluster.collective_timeout_s + job.cluster.heartbeat_timeout_s);
  if (std::optional<std::string> failure = coordinator->awaitOthers(within)) {
    std::fprintf(stderr, "dtrain: rank 0 (%s): the run did not end cleanly: %s\n",
                 run.assignment.label.c_str(), failure->c_str());
    coordinator->lingerAfterFailure();
    return code == kExitOk ? kExitPeerLost : code;
  }
  return code;
}

}  // namespace dtrain::cli
