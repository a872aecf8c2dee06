#include "core/comm/rendezvous_barriers.h"

#include <utility>

namespace dtrain {

namespace {

std::vector<int> missingRanks(const std::map<int, BarrierArrival>& arrivals, int world_size) {
  std::vector<int> out;
  for (int r = 0; r < world_size; ++r)
    if (!arrivals.count(r)) out.push_back(r);
  return out;
}

}  // namespace

std::vector<BarrierArrival> RendezvousBarriers::arrive(const std::string& name, BarrierArrival arrival,
                                                       int world_size) {
  Arrivals& arrivals = barriers_[name];
  int rank = arrival.rank;
  arrivals[rank] = std::move(arrival);
  if (static_cast<int>(arrivals.size()) < world_size) return {};
  std::vector<BarrierArrival> done;
  for (auto& [r, a] : arrivals) done.push_back(std::move(a));
  barriers_.erase(name);
  return done;
}

template <class Pred>
std::vector<StrandedArrival> RendezvousBarriers::take(int world_size, Pred pred) {
  std::vector<StrandedArrival> out;
  for (auto b = barriers_.begin(); b != barriers_.end();) {
    Arrivals& arrivals = b->second;
    // The missing ranks as the arrivals saw them, before any is taken out.
    std::vector<int> missing = missingRanks(arrivals, world_size);
    for (auto a = arrivals.begin(); a != arrivals.end();) {
      if (pred(arrivals, a->second)) {
        out.push_back({b->first, std::move(a->second), missing});
        a = arrivals.erase(a);
      } else {
        ++a;
      }
    }
    b = arrivals.empty() ? barriers_.erase(b) : std::next(b);
  }
  return out;
}

std::vector<StrandedArrival> RendezvousBarriers::takeExpired(RendezvousClock::time_point now,
                                                             int world_size) {
  return take(world_size, [&](const Arrivals&, const BarrierArrival& a) { return a.deadline <= now; });
}

std::vector<StrandedArrival> RendezvousBarriers::takeWaitingFor(int rank, int world_size) {
  return take(world_size,
              [&](const Arrivals& arrivals, const BarrierArrival&) { return !arrivals.count(rank); });
}

std::vector<StrandedArrival> RendezvousBarriers::takeAll(int world_size) {
  return take(world_size, [](const Arrivals&, const BarrierArrival&) { return true; });
}

}  // namespace dtrain
