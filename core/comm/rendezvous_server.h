// RendezvousServer: the coordinator that node 0's dtrain serves. A ZeroMQ
// ROUTER socket takes every worker's DEALER connection; RendezvousCoordinator
// decides what to answer. Workers join and get their rank, world size and
// generation; then the server keeps their key-value store and barriers,
// watches their heartbeats, and broadcasts an abort to all of them.
//
// Threading: the socket lives on the server's own thread (start() to stop());
// the status accessors may be called from any thread. The log callback is
// called from the server's thread. Nothing a peer sends can crash or stall
// it: garbage, malformed frames and strangers get a refusal or are dropped.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "core/comm/rendezvous_coordinator.h"
#include "core/comm/rendezvous_types.h"

namespace dtrain {

class RendezvousServer {
 public:
  // Binds now, so a taken port fails here (CommError naming the port); the
  // server answers nobody until start(). Throws CommError for a bad layout.
  explicit RendezvousServer(RendezvousServerConfig config);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  void start();
  // Stops serving and closes nothing yet (the destructor does); idempotent.
  void stop();

  // The TCP port it listens on (the chosen one when bound to port 0).
  int port() const { return port_; }

  // The latest group formed (and no new one is gathering).
  bool formed() const;
  // Of the latest formed group; 0 before the first.
  uint64_t generation() const;
  // Why the latest group aborted (or the latest gathering failed), if it did.
  std::optional<std::string> aborted() const;
  // Every rank of the latest group has left cleanly.
  bool allLeft() const;
  // The latest group's `rank` is gone (its host saw its process die): the
  // group drops it if it survives the loss, else aborts. Any thread.
  void reportLost(int rank, const std::string& why);
  // The latest group's ranks lost and survived, in order.
  std::vector<int> lostRanks() const;
  // The process `pid` of node `node` (a worker the caller started) is gone:
  // see RendezvousCoordinator::loseProcess. Any thread.
  void reportLostProcess(int node, int pid, const std::string& why);
  // All of the above at once.
  RendezvousStatus status() const;

 private:
  void serve();
  void serveOnce();
  void publishStatus();
  void sendAll(Outbox& out);
  void log(const std::string& line) const;

  RendezvousServerConfig config_;
  RendezvousCoordinator coordinator_;
  zmq::context_t context_;
  zmq::socket_t router_;
  int port_ = 0;

  std::thread thread_;
  std::atomic<bool> stopping_{false};

  mutable std::mutex status_mutex_;
  RendezvousStatus status_;
  std::vector<std::pair<int, std::string>> reported_lost_;  // guarded by status_mutex_
  struct LostProcess {
    int node = 0;
    int pid = 0;
    std::string why;
  };
  std::vector<LostProcess> reported_lost_processes_;  // guarded by status_mutex_
};

}  // namespace dtrain
