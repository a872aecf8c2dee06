// RendezvousBarriers: the coordinator's named barriers for one generation. A
// barrier completes when every rank has arrived and then starts over, so a
// name can be reused for the next round. An arrival that reaches its deadline
// first is taken out and failed, naming the ranks that had not arrived.
// Ownership: plain state of the coordinator; not thread-safe.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/comm/rendezvous_key_values.h"

namespace dtrain {

struct BarrierArrival {
  std::string identity;
  uint64_t request_id = 0;
  int rank = -1;
  std::chrono::milliseconds timeout{0};
  RendezvousClock::time_point deadline;
};

// An arrival that will not complete, with the ranks it was waiting for.
struct StrandedArrival {
  std::string name;
  BarrierArrival arrival;
  std::vector<int> missing;
};

class RendezvousBarriers {
 public:
  // Records the arrival (a rank arriving again replaces its earlier request).
  // When it completes the barrier, returns every arrival and forgets the
  // barrier; otherwise returns nothing.
  std::vector<BarrierArrival> arrive(const std::string& name, BarrierArrival arrival, int world_size);
  // Arrivals past their deadline; they leave their barrier.
  std::vector<StrandedArrival> takeExpired(RendezvousClock::time_point now, int world_size);
  // Arrivals at barriers that `rank` has not reached: it left, so they cannot complete.
  std::vector<StrandedArrival> takeWaitingFor(int rank, int world_size);
  // Every arrival (the group ended).
  std::vector<StrandedArrival> takeAll(int world_size);

  void clear() { barriers_.clear(); }

 private:
  using Arrivals = std::map<int, BarrierArrival>;  // by rank
  template <class Pred>
  std::vector<StrandedArrival> take(int world_size, Pred pred);

  std::map<std::string, Arrivals> barriers_;
};

}  // namespace dtrain
