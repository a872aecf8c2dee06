#include "core/launch/worker_session.h"

#include <unistd.h>

#include <cstdio>

#include "core/comm/rendezvous_client.h"
#include "core/errors.h"
#include "core/launch/process_group_choice.h"
#include "core/train/device_choice.h"
#include "core/util/seconds.h"

namespace dtrain {
namespace {

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

WorkerSession::WorkerSession(const JobConfig& job, const WorkerAssignment& a,
                             std::function<void()> before_abort_exit) {
  JoinRequest req;
  req.job_id = a.job_id;
  req.token = a.token;
  req.host = hostName();
  req.node = a.node;
  req.slot = a.slot;
  req.pid = static_cast<int>(::getpid());
  ClientTimeouts t;
  t.join = secondsToMillis(job.cluster.join_timeout_s);
  t.heartbeat_interval = secondsToMillis(job.cluster.heartbeat_interval_s);
  t.heartbeat_timeout = secondsToMillis(job.cluster.heartbeat_timeout_s);
  client_ = std::make_unique<RendezvousClient>(a.coordinator, req, t);
  const std::string label =
      a.label.empty() ? "node " + std::to_string(a.node) + ", slot " + std::to_string(a.slot) : a.label;
  client_->onAbort([this, label, before_abort_exit](const std::string& reason) {
    // Called on the client's thread while the main thread may be blocked in
    // a collective: report and leave now.
    std::fprintf(stderr, "dtrain: rank %d (%s): stopping: %s\n", rank_, label.c_str(), reason.c_str());
    std::fflush(stderr);
    if (before_abort_exit) before_abort_exit();
    ::_exit(kExitPeerLost);
  });
  Membership m = client_->join();
  rank_ = m.rank;
  world_ = m.world_size;
  generation_ = m.generation;
  address_ = a.address;
  for (const PeerInfo& p : m.peers) {
    nodes_.push_back(p.node);
    hosts_.push_back(p.host);
  }
  if (job.strategy.type == "parameter_server") {
    // The last job.strategy.ps ranks are the shards; the workers' collectives
    // are among the workers alone (the shards answer requests instead).
    const int workers = world_ - job.strategy.ps;
    if (workers < 1)
      throw ConfigError("[strategy] ps = " + std::to_string(job.strategy.ps) +
                        " shards leave no worker among " + std::to_string(world_) + " processes");
    if (rank_ >= workers) {
      shard_ = rank_ - workers;
      return;
    }
    m.world_size = workers;
    m.peers.resize(static_cast<size_t>(workers));
  }
  group_ = connectProcessGroup(*client_, m, job, a.address, a.all_ranks_on_this_host,
                               resolveDevice(job.job.device, a.localIndex()), a.local_workers);
}

WorkerSession::~WorkerSession() {
  if (!left_ && client_) {
    try {
      client_->abort("rank " + std::to_string(rank_) + " ended without finishing");
    } catch (...) {
    }
  }
}

Store& WorkerSession::store() { return *client_; }

void WorkerSession::abort(const std::string& reason) {
  left_ = true;
  try {
    client_->abort(reason);
  } catch (...) {
  }
}

void WorkerSession::leave() {
  left_ = true;
  client_->leave();
}

}  // namespace dtrain
