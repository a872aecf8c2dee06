#include "core/launch/worker_session.h"

#include <unistd.h>

#include <algorithm>
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
                             std::function<void()> before_abort_exit)
    : job_(job),
      assignment_(a),
      before_abort_exit_(std::move(before_abort_exit)),
      elastic_(job.cluster.elastic) {
  // A survivor must not wait on a lost peer longer than the coordinator takes
  // to find it lost.
  if (elastic_)
    job_.cluster.collective_timeout_s =
        std::min(job.cluster.collective_timeout_s, job.cluster.heartbeat_timeout_s);
  label_ = a.label.empty() ? "node " + std::to_string(a.node) + ", slot " + std::to_string(a.slot) : a.label;
  join();
}

void WorkerSession::join() {
  const WorkerAssignment& a = assignment_;
  JoinRequest req;
  req.job_id = a.job_id;
  req.token = a.token;
  req.host = hostName();
  req.node = a.node;
  req.slot = a.slot;
  req.pid = static_cast<int>(::getpid());
  ClientTimeouts t;
  t.join = secondsToMillis(job_.cluster.join_timeout_s);
  t.heartbeat_interval = secondsToMillis(job_.cluster.heartbeat_interval_s);
  t.heartbeat_timeout = secondsToMillis(job_.cluster.heartbeat_timeout_s);
  t.coordinator_known = generation_ > 0;
  client_ = std::make_unique<RendezvousClient>(a.coordinator, req, t);
  client_->onAbort([this](const std::string& reason) {
    // Called on the client's thread while the main thread may be blocked in
    // a collective: report and leave now.
    std::fprintf(stderr, "dtrain: rank %d (%s): stopping: %s\n", rank_, label_.c_str(), reason.c_str());
    std::fflush(stderr);
    if (before_abort_exit_) before_abort_exit_();
    ::_exit(kExitPeerLost);
  });
  if (elastic_)
    client_->onRegroup([this](const std::string&) {
      std::lock_guard<std::mutex> lock(group_mutex_);
      if (group_) group_->abandon();
    });
  Membership m;
  try {
    m = client_->join();
  } catch (const CommError& e) {
    // Refused (the run cannot go on), or no coordinator: the end of this worker, not a regroup to retry.
    if (generation_ == 0) throw;
    throw Error(std::string("cannot join the run's next generation: ") + e.what());
  }
  rank_ = m.rank;
  world_ = m.world_size;
  generation_ = m.generation;
  address_ = a.address;
  nodes_.clear();
  hosts_.clear();
  for (const PeerInfo& p : m.peers) {
    nodes_.push_back(p.node);
    hosts_.push_back(p.host);
  }
  const JobConfig& job = job_;
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
  std::shared_ptr<ProcessGroup> group =
      connectProcessGroup(*client_, m, job, a.address, a.all_ranks_on_this_host,
                          resolveDevice(job.job.device, a.localIndex()), a.local_workers);
  std::lock_guard<std::mutex> lock(group_mutex_);
  group_ = std::move(group);
  // A notice that came while connecting is for this group too.
  if (client_->regroupReason()) group_->abandon();
}

std::shared_ptr<ProcessGroup> WorkerSession::group() const {
  std::lock_guard<std::mutex> lock(group_mutex_);
  return group_;
}

WorkerSession::Regrouped WorkerSession::regroup() {
  std::shared_ptr<ProcessGroup> old;
  {
    std::lock_guard<std::mutex> lock(group_mutex_);
    old.swap(group_);
  }
  if (old) old->abandon();  // its destructor waits for no peer
  old.reset();
  client_.reset();  // that group is over; its connection goes with it
  join();
  Regrouped r;
  const Bytes change = client_->get(kElasticChangeKey, std::chrono::seconds(10));
  r.change.assign(change.begin(), change.end());
  if (client_->check(kElasticStopKey)) {
    const Bytes stop = client_->get(kElasticStopKey, std::chrono::seconds(10));
    r.stop.assign(stop.begin(), stop.end());
  }
  return r;
}

bool WorkerSession::replacementsWaiting() { return client_->check(kElasticWaitingKey); }

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
