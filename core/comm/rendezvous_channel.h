// RendezvousChannel: a worker's line to the coordinator. ZeroMQ sockets are
// not thread-safe, so one I/O thread owns the DEALER socket: it sends the
// requests callers queue (woken through an inproc socket), matches each answer
// to its caller by request id, sends heartbeats, and watches for silence.
//
// Aborts: an abort notice from the coordinator, a refused heartbeat of a
// formed group, or no message from the coordinator for the heartbeat timeout
// ends the channel: every waiting and later call throws CommError with the
// reason, and the abort handler runs once, on the I/O thread.
// Thread-safety: call() and the other methods may be used from any thread.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "core/comm/rendezvous_types.h"
#include "core/comm/wire.h"

namespace dtrain {

class RendezvousChannel {
 public:
  using AbortHandler = std::function<void(const std::string& reason)>;
  using RegroupHandler = std::function<void(const std::string& reason)>;

  // Connects (ZeroMQ connects in the background and queues until then).
  // Throws CommError for an endpoint that is not tcp://HOST:PORT.
  RendezvousChannel(std::string endpoint, std::string routing_id, ClientTimeouts timeouts);
  ~RendezvousChannel();
  RendezvousChannel(const RendezvousChannel&) = delete;
  RendezvousChannel& operator=(const RendezvousChannel&) = delete;

  // Sends `body` and returns the coordinator's answer. Throws CommError with
  // the coordinator's reason when it refuses, with the abort reason when the
  // channel is aborted, and with timeout_message() when `deadline` passes
  // first; `grace` more is granted when the coordinator has been heard from
  // (it is there, and its own answer will say more than a timeout).
  wire::Body call(const wire::Body& body, RendezvousClock::time_point deadline,
                  std::chrono::milliseconds grace, const std::function<std::string()>& timeout_message);

  // Heartbeats from now on carry `generation` (0 while the group forms).
  void startHeartbeats(uint64_t generation);
  // After leaving: no more heartbeats, and the coordinator's silence is expected.
  void stopHeartbeats();

  // Ends the channel from this side (the worker aborts); the handler is not called.
  void abortLocally(const std::string& reason);
  std::optional<std::string> abortReason() const;
  void setAbortHandler(AbortHandler handler);
  // An elastic run's regroup notice: the handler runs once, on the I/O thread;
  // a heartbeat answers at once (this worker is alive), heartbeats go on, and
  // refusals of them no longer abort (the group is over; the worker joins again).
  void setRegroupHandler(RegroupHandler handler);
  std::optional<std::string> regroupReason() const;

  // Whether any message has come from the coordinator yet.
  bool heardFromCoordinator() const { return heard_; }
  const std::string& endpoint() const { return endpoint_; }

 private:
  struct PendingCall {
    bool done = false;
    wire::Body reply;
    std::optional<std::string> failure;
  };

  void serve();
  void sendQueued();
  void receiveAll(RendezvousClock::time_point now);
  void dispatch(const wire::Message& message);
  void beatAndWatch(RendezvousClock::time_point now);
  void failPending(uint64_t request_id, const std::string& reason);
  // Aborts and, when `notify`, calls the handler. Called without mutex_ held.
  void abort(const std::string& reason, bool notify);

  std::string endpoint_;
  ClientTimeouts timeouts_;

  zmq::context_t context_;
  zmq::socket_t dealer_;   // used by the I/O thread only
  zmq::socket_t wake_rx_;  // used by the I/O thread only
  zmq::socket_t wake_tx_;  // used by callers, under mutex_

  mutable std::mutex mutex_;
  std::condition_variable answered_;
  std::deque<std::pair<uint64_t, std::string>> outbox_;
  std::map<uint64_t, std::shared_ptr<PendingCall>> pending_;
  uint64_t next_request_id_ = 1;
  std::optional<std::string> abort_reason_;
  AbortHandler on_abort_;
  RegroupHandler on_regroup_;
  std::optional<std::string> regroup_reason_;
  bool beating_ = false;
  uint64_t generation_ = 0;

  // I/O thread only.
  RendezvousClock::time_point next_beat_;
  RendezvousClock::time_point last_heard_;
  uint64_t next_beat_id_ = 1;

  std::atomic<bool> heard_{false};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace dtrain
