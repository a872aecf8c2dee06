// Drives a RendezvousCoordinator directly, on a clock the test moves: the
// frames each peer would have received, decoded.
#pragma once
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/comm/rendezvous_coordinator.h"

namespace dtrain::test {

// Feeds frames to a coordinator and keeps what it answers, per peer.
class Driver {
 public:
  explicit Driver(const RendezvousServerConfig& config) : coordinator_(config) {}

  void send(const std::string& peer, uint64_t request_id, const wire::Body& body) {
    std::string frame = wire::encode(request_id, body);
    coordinator_.handle(peer, frame.data(), frame.size(), now_, out_);
    collect();
  }
  void advance(std::chrono::milliseconds by) {
    now_ += by;
    coordinator_.tick(now_, out_);
    collect();
  }
  // `rank`'s host saw its process die.
  void lose(int rank, const std::string& why) {
    coordinator_.lose(rank, why, out_);
    collect();
  }
  // Process `pid` of node `node` is gone (its host saw it die).
  void loseProcess(int node, int pid, const std::string& why) {
    coordinator_.loseProcess(node, pid, why, now_, out_);
    collect();
  }
  // Everything `peer` received so far (and forgets it).
  std::vector<wire::Message> take(const std::string& peer) { return std::exchange(inbox_[peer], {}); }
  const RendezvousCoordinator& coordinator() const { return coordinator_; }

 private:
  void collect() {
    for (const OutgoingFrame& f : out_.frames())
      inbox_[f.identity].push_back(wire::decode(f.frame.data(), f.frame.size()));
    out_.frames().clear();
  }
  RendezvousCoordinator coordinator_;
  RendezvousClock::time_point now_{};
  Outbox out_;
  std::map<std::string, std::vector<wire::Message>> inbox_;
};

template <class T>
const T& only(const std::vector<wire::Message>& messages) {
  REQUIRE(messages.size() == 1);
  const T* t = std::get_if<T>(&messages.front().body);
  REQUIRE_MESSAGE(t != nullptr, wire::messageTypeName(wire::typeOf(messages.front().body)));
  return *t;
}

template <class T>
T withGeneration(T m, uint64_t generation) {
  m.generation = generation;
  return m;
}

}  // namespace dtrain::test
