#include "core/launch/launcher_run.h"

#include <algorithm>
#include <thread>

#include "core/comm/rendezvous_server.h"
#include "core/comm/rendezvous_text.h"
#include "core/config/cluster_token.h"
#include "core/config/host_port.h"
#include "core/config/local_node.h"
#include "core/errors.h"
#include "core/launch/host_run.h"
#include "core/launch/route_address.h"
#include "core/util/seconds.h"

namespace dtrain {
namespace {

// How long rank 0 keeps serving after it failed: time for frames already
// queued (an abort notice, join refusals) to leave; the socket drops them on close.
constexpr std::chrono::milliseconds kLingerAfterFailure{1000};

// "torchrun started 3 processes" etc.: how messages name the launcher's count.
std::string processes(const LaunchEnv& env) {
  return env.source + " started " + std::to_string(env.world_size) + " processes";
}

// The processes the job itself asks for, and in which words; -1 when it
// leaves the count to the launcher (a multi-host job without hosts).
std::pair<int, std::string> jobProcesses(const JobConfig& job) {
  if (job.strategy.type == "multi_worker_mirrored" && job.cluster.hosts.empty()) return {-1, ""};
  if (!job.cluster.present && job.strategy.type == "parameter_server")
    return {job.strategy.workers + job.strategy.ps, "[strategy] workers + ps"};
  if (!job.cluster.present && job.strategy.type == "pipeline")
    return {trainingProcesses(job.strategy), "[strategy] stages x replicas"};
  if (!job.cluster.present) return {job.strategy.workers, "[strategy] workers"};
  int slots = 0;
  for (const ClusterHost& h : job.cluster.hosts) slots += h.slots;
  return {slots, "the slots of its [cluster] hosts"};
}

HostPort coordinatorOf(const JobConfig& job, const LaunchEnv& env) {
  auto parse = [](const std::string& text, const std::string& what) {
    std::string problem;
    std::optional<HostPort> hp = parseHostPort(text, &problem);
    if (!hp) throw ConfigError(what + ": " + problem + " (got \"" + text + "\")");
    return *hp;
  };
  if (!env.coordinator.empty() && !env.coordinator_port_taken)
    return parse(env.coordinator, "MASTER_ADDR/MASTER_PORT");
  if (job.cluster.present && !job.cluster.coordinator.empty())
    return parse(job.cluster.coordinator, "[cluster] coordinator");
  if (!env.coordinator.empty()) {
    // torchrun's agent serves its own store on MASTER_PORT; the port after it is the convention here.
    HostPort hp = parse(env.coordinator, "MASTER_ADDR/MASTER_PORT");
    if (hp.port < 65535) return HostPort{hp.host, hp.port + 1};
  }
  throw ConfigError(env.source + " started this process but the job names no rendezvous coordinator: set " +
                    "[cluster] coordinator = \"host:port\" (rank 0's host and a free port), or MASTER_ADDR " +
                    "and MASTER_PORT");
}

bool isLoopback(const std::string& address) { return address.rfind("127.", 0) == 0 || address == "::1"; }

// "torchrun node 1, local rank 0": how this process's messages name it after its rank.
std::string labelOf(const LaunchEnv& env) {
  std::string where = env.node >= 0 ? " node " + std::to_string(env.node) + "," : "";
  return env.source + where + " local rank " + std::to_string(env.local_rank);
}

}  // namespace

std::string launcherRunToken(const JobConfig& job, const LaunchEnv& env, const std::string& job_id) {
  if (job.cluster.present && (!job.cluster.token.empty() || !job.cluster.token_file.empty()))
    return readClusterToken(job.cluster);
  return "launch " + env.source + " " + (env.launch_id.empty() ? "-" : env.launch_id) + " " + job_id;
}

LauncherRun planLauncherRun(const JobConfig& job, const LaunchEnv& env) {
  if (job.strategy.type == "one_device")
    throw ConfigError(processes(env) + " but the job's [strategy] type is 'one_device' (one process): set " +
                      "type = \"mirrored\" or \"multi_worker_mirrored\", or start a single process");
  LauncherRun run;
  run.env = env;
  HostPort hp = coordinatorOf(job, env);
  run.coordinator = joinHostPort(hp.host, hp.port);
  auto [asked, asked_by] = jobProcesses(job);
  if (asked >= 0 && asked != env.world_size)
    run.notes.push_back("dtrain: " + processes(env) + " but the job asks for " + std::to_string(asked) +
                        " (" + asked_by + "): running " + std::to_string(env.world_size) +
                        " ranks, one per process, as the launcher says");

  WorkerAssignment& a = run.assignment;
  a.coordinator = "tcp://" + run.coordinator;
  a.job_id = runJobId(job);
  a.token = launcherRunToken(job, env, a.job_id);
  a.node = env.rank;
  a.slot = 0;
  a.local_workers = std::max(1, env.local_world_size);
  a.address = localAddressToward(hp.host, hp.port);
  a.label = labelOf(env);
  a.all_ranks_on_this_host = env.local_world_size == env.world_size;
  a.local_rank = env.local_rank;
  // Peers dial this address for the collectives. A coordinator reached over
  // loopback (its name mapped to 127.0.1.1 here, as Debian's /etc/hosts
  // does) would give them this host's loopback: refuse that when the launch
  // spans hosts, rather than let them wait out the collective timeout.
  bool spans_hosts = (env.local_world_size > 0 && env.local_world_size < env.world_size) || env.node > 0;
  if (spans_hosts && isLoopback(a.address))
    throw ConfigError("the rendezvous coordinator " + run.coordinator + " is reached over loopback here (" +
                      a.address + "), but the " + env.source +
                      " launch spans several hosts, which could not " +
                      "reach this one: name rank 0's host by an address the others reach (MASTER_ADDR or " +
                      "[cluster] coordinator), or map its name to that address in /etc/hosts");
  return run;
}

LauncherCoordinator::LauncherCoordinator(const JobConfig& job, const LauncherRun& run, std::FILE* log) {
  std::string problem;
  std::optional<HostPort> parsed = parseHostPort(run.coordinator, &problem);
  if (!parsed) throw ConfigError("the rendezvous coordinator " + run.coordinator + ": " + problem);
  const HostPort hp = *parsed;
  auto say = [log](const std::string& line) {
    std::fprintf(log, "dtrain: coordinator: %s\n", line.c_str());
    std::fflush(log);
  };
  // Rank 0 serves where the others look: warn when that is not this host.
  std::vector<std::string> named = resolveHostAddresses(hp.host);
  std::vector<std::string> mine = localHostIdentity().addresses;
  bool here = named.empty() || std::any_of(named.begin(), named.end(), [&](const std::string& a) {
                return std::find(mine.begin(), mine.end(), a) != mine.end();
              });
  if (!here)
    say("warning: " + run.coordinator + " is not an address of this host, where " + run.env.source +
        " rank 0 runs and serves the rendezvous; the other ranks will not find it unless that address " +
        "leads here (name rank 0's host)");

  RendezvousServerConfig sc;
  sc.bind = "tcp://*:" + std::to_string(hp.port);
  sc.job_id = run.assignment.job_id;
  sc.token = run.assignment.token;
  for (int r = 0; r < run.env.world_size; ++r)
    sc.nodes.push_back(NodeLayout{run.env.source + " rank " + std::to_string(r), 1});
  sc.join_timeout = secondsToMillis(job.cluster.join_timeout_s);
  sc.heartbeat_timeout = secondsToMillis(job.cluster.heartbeat_timeout_s);
  allowSurvivableLosses(job, run.env.world_size, sc);
  sc.log = say;
  server_ = std::make_unique<RendezvousServer>(sc);
  server_->start();
}

LauncherCoordinator::~LauncherCoordinator() = default;

std::optional<std::string> LauncherCoordinator::awaitOthers(std::chrono::milliseconds within) {
  auto deadline = std::chrono::steady_clock::now() + within;
  while (!server_->allLeft()) {
    if (auto reason = server_->aborted()) return reason;
    if (std::chrono::steady_clock::now() >= deadline)
      return "not every rank had finished " + secondsText(within) +
             " after rank 0 did (a rank stuck, or its process ended without a word)";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return server_->aborted();
}

void LauncherCoordinator::lingerAfterFailure() {
  auto deadline = std::chrono::steady_clock::now() + kLingerAfterFailure;
  while (std::chrono::steady_clock::now() < deadline && !server_->allLeft())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace dtrain
