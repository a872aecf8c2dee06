#include "core/launch/host_run.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "core/comm/rendezvous_server.h"
#include "core/config/cluster_token.h"
#include "core/config/host_port.h"
#include "core/config/job_to_toml.h"
#include "core/config/local_node.h"
#include "core/errors.h"
#include "core/io/crc32.h"
#include "core/launch/lost_worker_report.h"
#include "core/launch/worker_env.h"
#include "core/launch/worker_processes.h"
#include "core/launch/worker_session.h"
#include "core/util/process_state.h"
#include "core/util/seconds.h"

namespace dtrain {
namespace {

// A fresh secret for a one-host run: only this host's workers know it.
std::string randomToken() {
  unsigned char bytes[16] = {};
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::read(fd, bytes, sizeof bytes) != static_cast<ssize_t>(sizeof bytes)) {
    if (fd >= 0) ::close(fd);
    throw IoError("cannot read /dev/urandom for the run's token");
  }
  ::close(fd);
  std::string hex;
  char buf[3];
  for (unsigned char b : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    hex += buf;
  }
  return hex;
}

bool isLoopback(const std::string& address) { return address.rfind("127.", 0) == 0 || address == "::1"; }

// This host's workers listen for their peers' collectives on its [cluster]
// address. A name that resolves to loopback here (Debian's /etc/hosts maps
// the machine's own name to 127.0.1.1) would have the peers on other hosts
// dial their own loopback and wait out the collective timeout: refuse it now.
void requireReachableAddress(const ClusterSection& cluster, int node) {
  const std::string& address = cluster.hosts[static_cast<size_t>(node)].address;
  std::vector<std::string> resolved = resolveHostAddresses(address);
  if (resolved.empty() || std::find_if_not(resolved.begin(), resolved.end(), isLoopback) != resolved.end())
    return;
  std::string list;
  for (const std::string& a : resolved) list += (list.empty() ? "" : ", ") + a;
  throw ConfigError("[cluster] hosts[" + std::to_string(node) + "] address '" + address +
                    "' (this host, node " + std::to_string(node) + ") resolves to loopback here (" + list +
                    "), which the other hosts cannot reach; list this host by an address they reach, "
                    "or map its name to that address in /etc/hosts");
}

struct Plan {
  std::vector<NodeLayout> nodes;
  int node = 0;
  std::string bind;         // node 0's coordinator bind
  std::string coordinator;  // what workers connect to (port filled in later for port 0)
  std::string token;
  // Parameter server across hosts: a host's shards join as a node of their
  // own, listed after every host's workers, so the shards are the last ranks
  // (as on one host). By host: that node's index, or -1.
  std::vector<int> shard_node;
  int ranks() const {
    int n = 0;
    for (const NodeLayout& l : nodes) n += l.slots;
    return n;
  }
};

Plan planRun(const JobConfig& job, int node_option) {
  Plan p;
  if (!job.cluster.present) {  // mirrored on one host: loopback, any free port
    // A parameter server's shards are processes beside its workers (the last ranks).
    const int shards = job.strategy.type == "parameter_server" ? job.strategy.ps : 0;
    p.nodes = {NodeLayout{"127.0.0.1", trainingProcesses(job.strategy) + shards}};
    p.node = 0;
    p.bind = "tcp://127.0.0.1:0";
    p.token = randomToken();
    return p;
  }
  for (const ClusterHost& h : job.cluster.hosts) p.nodes.push_back(NodeLayout{h.address, h.slots});
  p.node = node_option >= 0 ? node_option : findLocalNode(job.cluster);
  if (p.node >= static_cast<int>(p.nodes.size()))
    throw ConfigError("--node " + std::to_string(p.node) + " is outside the " +
                      std::to_string(p.nodes.size()) + " [cluster] hosts (nodes 0.." +
                      std::to_string(p.nodes.size() - 1) + ")");
  if (p.nodes.size() > 1) requireReachableAddress(job.cluster, p.node);
  std::string problem;
  std::optional<HostPort> hp = parseHostPort(job.cluster.coordinator, &problem);
  if (!hp) throw ConfigError("[cluster] coordinator: " + problem);
  p.bind = "tcp://*:" + std::to_string(hp->port);
  p.coordinator = "tcp://" + joinHostPort(hp->host, hp->port);
  p.token = readClusterToken(job.cluster);
  if (job.strategy.type == "parameter_server") {
    bool placed = false;
    for (const ClusterHost& h : job.cluster.hosts) placed = placed || h.ps >= 0;
    for (size_t i = 0; i < job.cluster.hosts.size(); ++i) {
      const ClusterHost& h = job.cluster.hosts[i];
      // Without ps on any host, node 0 runs them all.
      const int shards = placed ? std::max(0, h.ps) : (i == 0 ? job.strategy.ps : 0);
      p.shard_node.push_back(shards > 0 ? static_cast<int>(p.nodes.size()) : -1);
      if (shards > 0) p.nodes.push_back(NodeLayout{h.address, shards});
    }
  }
  return p;
}

}  // namespace

bool survivableRank(const JobConfig& job, int ranks, int rank) {
  const StrategySection& s = job.strategy;
  // The last `ps` ranks are the shards. Synchronous batch norm sums its
  // statistics over every worker mid-step, through the collectives.
  return s.type == "parameter_server" && !(s.consistency == "sync" && s.sync_batchnorm) && rank >= 1 &&
         rank < ranks - s.ps;
}

void allowSurvivableLosses(const JobConfig& job, int ranks, RendezvousServerConfig& config) {
  config.survivable.clear();
  for (int r = 0; r < ranks; ++r) config.survivable.push_back(survivableRank(job, ranks, r));
  config.max_survivable_losses = std::max(0, ranks - job.strategy.ps - job.strategy.min_workers);
}

std::string runJobId(const JobConfig& job) {
  // Only rank 0 writes to the run directory, and other hosts may name it by
  // another path (a different mount, a relative path from another directory).
  JobConfig digested = job;
  digested.job.run_dir.clear();
  std::string toml = jobToToml(digested);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc32Update(0, toml.data(), toml.size()));
  return job.job.name + "-" + hex;
}

int runHost(const JobConfig& job, const HostRunOptions& options) {
  Plan plan = planRun(job, options.node);
  const std::string job_id = runJobId(job);
  std::unique_ptr<RendezvousServer> server;
  if (plan.node == 0) {
    RendezvousServerConfig sc;
    sc.bind = plan.bind;
    sc.job_id = job_id;
    sc.token = plan.token;
    sc.nodes = plan.nodes;
    sc.join_timeout = secondsToMillis(job.cluster.join_timeout_s);
    sc.heartbeat_timeout = secondsToMillis(job.cluster.heartbeat_timeout_s);
    allowSurvivableLosses(job, plan.ranks(), sc);
    sc.elastic.enabled = job.cluster.elastic;
    sc.elastic.min_workers = job.strategy.min_workers;
    sc.elastic.max_restarts = job.cluster.max_restarts;
    sc.elastic.restart_window = secondsToMillis(job.cluster.restart_window_s);
    sc.elastic.host_cooldown = secondsToMillis(job.cluster.host_cooldown_s);
    std::FILE* log = options.log;
    sc.log = [log](const std::string& line) {
      std::fprintf(log, "dtrain: coordinator: %s\n", line.c_str());
      std::fflush(log);
    };
    server = std::make_unique<RendezvousServer>(sc);
    server->start();
    if (!job.cluster.present) plan.coordinator = "tcp://127.0.0.1:" + std::to_string(server->port());
  }
  const NodeLayout& me = plan.nodes[static_cast<size_t>(plan.node)];
  const int worker_ranks = plan.ranks() - (job.strategy.type == "parameter_server" ? job.strategy.ps : 0);
  std::vector<WorkerLaunch> launches;
  std::vector<int> launch_rank;  // by launch
  // This host's workers (node plan.node), then its shards (a node of their own across hosts).
  auto launch = [&](int node, int local_processes) {
    int first_rank = 0;
    for (int n = 0; n < node; ++n) first_rank += plan.nodes[static_cast<size_t>(n)].slots;
    for (int slot = 0; slot < plan.nodes[static_cast<size_t>(node)].slots; ++slot) {
      WorkerLaunch w;
      const int rank = first_rank + slot;
      w.label = "rank " + std::to_string(rank) + " (node " + std::to_string(plan.node) + ", slot " +
                std::to_string(node == plan.node ? slot : me.slots + slot) + ")";
      // A parameter server's shards are its last ranks: a lost one is named as what it is.
      if (rank >= worker_ranks)
        w.label = "parameter-server shard " + std::to_string(rank - worker_ranks) + " (" + w.label + ")";
      // An elastic run goes on without any one worker.
      w.survivable = survivableRank(job, plan.ranks(), rank) || job.cluster.elastic;
      w.argv.push_back(options.program);
      w.argv.insert(w.argv.end(), options.worker_args.begin(), options.worker_args.end());
      WorkerAssignment a;
      a.coordinator = plan.coordinator;
      a.token = plan.token;
      a.job_id = job_id;
      a.node = node;
      a.slot = slot;
      a.local_workers = local_processes;
      a.address = me.address;
      w.env = workerEnvironment(a);
      launches.push_back(std::move(w));
      launch_rank.push_back(rank);
    }
  };
  const int shard_node = plan.node < static_cast<int>(plan.shard_node.size())
                             ? plan.shard_node[static_cast<size_t>(plan.node)]
                             : -1;
  const int local_processes =
      me.slots + (shard_node >= 0 ? plan.nodes[static_cast<size_t>(shard_node)].slots : 0);
  launch(plan.node, local_processes);
  if (shard_node >= 0) launch(shard_node, local_processes);
  // After a failure the others cannot finish a step anyway: a short grace.
  WorkerProcesses workers(std::chrono::seconds(3));
  workers.start(launches);
  // A lost worker the run survives: the coordinator hears of it at once
  // (rather than after the heartbeat timeout) when it is served here.
  std::unique_ptr<LostWorkerReport> report;  // an elastic run's hosts other than node 0
  if (!server && job.cluster.elastic)
    report = std::make_unique<LostWorkerReport>(plan.coordinator, job_id, plan.token);
  auto survived = [&](size_t index, const std::string& what) {
    std::fprintf(options.log, "dtrain: node %d: %s; the run goes on without it\n", plan.node, what.c_str());
    std::fflush(options.log);
    if (report) {
      const std::string failed = report->send(plan.node, static_cast<int>(workers.pids()[index]), what);
      if (!failed.empty())
        std::fprintf(options.log, "dtrain: node %d: could not tell the coordinator: %s\n", plan.node,
                     failed.c_str());
      std::fflush(options.log);
    }
    if (!server) return;
    if (job.cluster.elastic)
      server->reportLostProcess(plan.node, static_cast<int>(workers.pids()[index]), what);
    else
      server->reportLost(launch_rank[index], what);
  };
  WorkersOutcome out = workers.wait(
      [&]() -> std::string {
        if (server) {
          const RendezvousStatus status = server->status();
          if (status.failure) return *status.failure;
          // A rank the run dropped while it was frozen or cut off cannot act on
          // being told: ended here, so the host does not wait for it.
          for (int rank : status.lost)
            for (size_t i = 0; i < launch_rank.size(); ++i)
              if (launch_rank[i] == rank) workers.kill(i);
          // An elastic run's lost worker that still runs joins again as a
          // replacement; one frozen cannot.
          const std::vector<pid_t> pids = workers.pids();
          for (int pid : status.lost_pids)
            for (size_t i = 0; i < pids.size(); ++i) {
              const char state = pids[i] == pid ? processState(pid) : '\0';
              if (state == 'T' || state == 't') workers.kill(i);
            }
        }
        // An elastic run that finished without a frozen worker (its loss seen
        // by the coordinator on another host) leaves it to this host to end.
        if (job.cluster.elastic && workers.anyEndedCleanly()) workers.killStopped();
        return {};
      },
      survived);
  // An elastic run may go on on other hosts after this host's workers are
  // gone: node 0 serves its rendezvous until it has ended.
  while (server && job.cluster.elastic && out.failure.empty()) {
    const RendezvousStatus status = server->status();
    if (status.failure || status.generation == 0 || (status.all_left && !status.regrouping)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!out.failure.empty()) {
    // A worker that exited (not one killed by a signal) stopped on the
    // coordinator's abort or sent one: its reason names the rank (and host)
    // that was lost or failed first.
    std::string why = out.failure;
    if (server && out.exit_code < 128) {
      if (auto reason = server->aborted()) why = "the run was stopped: " + *reason;
    }
    std::fprintf(options.log, "dtrain: node %d: %s; stopped this host's workers\n", plan.node, why.c_str());
    std::fflush(options.log);
  }
  // An elastic run goes on without a lost worker, but a host none of whose
  // workers finished did not take part in the end.
  if (job.cluster.elastic && out.exit_code == 0 && !workers.anyEndedCleanly()) {
    std::fprintf(options.log, "dtrain: node %d: every worker of this host was lost before the run ended\n",
                 plan.node);
    std::fflush(options.log);
    return kExitPeerLost;
  }
  return out.exit_code;
}

}  // namespace dtrain
