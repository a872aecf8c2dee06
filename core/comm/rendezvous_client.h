// RendezvousClient: a worker's side of the rendezvous. It joins the group the
// coordinator forms (rank, world size, generation, peer table), and is then
// the run's Store (keys live on the coordinator, per generation), its barrier
// and its alarm: abort() tells every rank, onAbort() hears of any abort, of a
// lost rank, and of a lost coordinator.
//
// Every blocking call has a deadline; its CommError names what it waited for
// (the key, the barrier and the ranks that had not arrived, the missing
// workers). After an abort every call throws the abort's reason.
// Threading: requests go through RendezvousChannel's I/O thread; call join()
// once, then the other methods from any thread. onAbort callbacks run on the
// I/O thread and must not block for long.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/comm/rendezvous_channel.h"
#include "core/comm/rendezvous_types.h"
#include "core/comm/store.h"

namespace dtrain {

class RendezvousClient : public Store {
 public:
  // `coordinator` is "tcp://HOST:PORT". Connects in the background; throws
  // CommError only for an address that is not of that form.
  RendezvousClient(std::string coordinator, JoinRequest request, ClientTimeouts timeouts = {});
  // Closes the connection without a word: call leave() for a clean end, or
  // abort() for a failure, first; otherwise the coordinator finds this rank
  // lost after its heartbeat timeout.
  ~RendezvousClient() override;
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  // Blocks until every expected worker has joined (or the join timeout).
  // Throws CommError with the coordinator's reason when it refuses this worker
  // or the group does not form in time.
  Membership join();
  const Membership& membership() const { return membership_; }

  // Returns when every rank has reached the barrier `name`; a name can be reused.
  void barrier(const std::string& name, std::chrono::milliseconds timeout);
  // Aborts the run: the coordinator tells every other rank `reason`. Later calls
  // here throw; this worker's own onAbort callback is not called.
  void abort(const std::string& reason);
  // A clean end: this rank is done and no longer counts as lost when silent.
  void leave();
  // Called once, on the I/O thread, when the run aborts from elsewhere (another
  // rank, a lost rank, a lost coordinator). Register before join().
  void onAbort(std::function<void(const std::string& reason)> callback);
  std::optional<std::string> abortReason() const { return channel_.abortReason(); }
  // Called once, on the I/O thread, when an elastic run's coordinator ends
  // this group to form the next from its survivors (RendezvousChannel).
  // Register before join().
  void onRegroup(std::function<void(const std::string& reason)> callback);
  std::optional<std::string> regroupReason() const { return channel_.regroupReason(); }

  // Store, over the coordinator's table for this generation.
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::string& key) override;

 private:
  // The generation to send; throws CommError before join() or after leave().
  uint64_t activeGeneration(const char* operation) const;
  // A request the coordinator answers at once.
  wire::Body quickCall(const wire::Body& body, const std::string& what);
  // A request the coordinator holds up to `timeout` (then refuses, saying why).
  wire::Body waitingCall(const wire::Body& body, std::chrono::milliseconds timeout, const std::string& what);

  std::string coordinator_;
  JoinRequest request_;
  ClientTimeouts timeouts_;
  RendezvousChannel channel_;

  mutable std::mutex state_mutex_;
  Membership membership_;
  bool joined_ = false;
  bool left_ = false;
};

}  // namespace dtrain
