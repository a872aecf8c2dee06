// A worker process's membership of a run: it joins the rendezvous, learns
// its rank, connects the collectives (shared memory when every rank is on
// this host, Gloo over TCP otherwise; see process_group_choice.h) for the
// job's strategy to combine the workers over. When the coordinator reports a lost peer, or is
// itself lost, the worker prints one line naming it and exits at once (a
// blocked collective cannot be unwound safely; the latest checkpoint is
// complete or not yet published, never half-written).
//
// An elastic run ([cluster] elastic) instead re-forms: the coordinator's
// regroup notice abandons the group (a collective waiting on shared memory
// fails at once; one in Gloo at its deadline, which is then the heartbeat
// timeout, or when a peer's closed connection fails it), and regroup() joins
// the next generation and connects its group. Only the coordinator's abort,
// or losing the coordinator, still ends the process.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/config/job_config.h"
#include "core/launch/worker_env.h"

namespace dtrain {

class RendezvousClient;
class ProcessGroup;
class Store;

// Exit code of a worker stopped because the run lost a peer or its coordinator.
constexpr int kExitPeerLost = 3;

class WorkerSession {
 public:
  // Joins (waits for the whole group) and connects the process group.
  // `before_abort_exit` (may be empty) runs on the rendezvous client's thread
  // just before the process exits on an abort notice: rank 0 of a launcher
  // run uses it to keep the coordinator it serves up while the notice
  // reaches the others.
  WorkerSession(const JobConfig& job, const WorkerAssignment& assignment,
                std::function<void()> before_abort_exit = {});
  ~WorkerSession();
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  int rank() const { return rank_; }
  int worldSize() const { return world_; }
  // The ranks' collectives, which the job's strategy combines the workers over
  // (null in a parameter-server shard, which takes part in none).
  std::shared_ptr<ProcessGroup> group() const;
  // The parameter-server shard this process is, or -1 for a worker.
  int shard() const { return shard_; }
  // The run's key-value store (the rendezvous) and its generation.
  Store& store();
  uint64_t generation() const { return generation_; }
  // This host's address, where groups of its workers listen (Gloo).
  const std::string& address() const { return address_; }
  // Whether ranks a and b run on the same node (host).
  bool sameNode(int a, int b) const {
    return nodes_.at(static_cast<size_t>(a)) == nodes_.at(static_cast<size_t>(b));
  }
  // The host name rank r reported, for messages.
  const std::string& hostOf(int r) const { return hosts_.at(static_cast<size_t>(r)); }
  // Tells the others this rank failed (they stop at once) and why.
  void abort(const std::string& reason);
  // A clean end: the coordinator stops expecting heartbeats.
  void leave();

  // An elastic run.
  bool elastic() const { return elastic_; }
  struct Regrouped {
    std::string change;  // what the coordinator said changed ("generation 2: 3 worker(s); lost ...")
    std::string stop;    // why the run must stop now (a policy limit), or ""
  };
  // Joins the next generation and connects its group. The caller must have
  // dropped every other reference to group() first (the old group's
  // connections close as it goes). Throws CommError when the coordinator
  // refuses this worker or is lost.
  Regrouped regroup();
  // Whether replacements wait to join (asks the coordinator: a round trip).
  bool replacementsWaiting();

 private:
  // Joins the coordinator's group with a new client and connects the collectives.
  void join();
  JobConfig job_;  // the collectives' timeouts adjusted for an elastic run
  WorkerAssignment assignment_;
  std::function<void()> before_abort_exit_;
  std::string label_;
  bool elastic_ = false;
  std::unique_ptr<RendezvousClient> client_;
  mutable std::mutex group_mutex_;  // group_ is abandoned from the rendezvous thread
  std::shared_ptr<ProcessGroup> group_;
  int rank_ = 0, world_ = 1;
  int shard_ = -1;
  uint64_t generation_ = 0;
  std::string address_;
  std::vector<int> nodes_;          // per rank
  std::vector<std::string> hosts_;  // per rank
  bool left_ = false;
};

}  // namespace dtrain
