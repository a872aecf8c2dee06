#include "core/comm/rendezvous_regroup.h"

#include <utility>

#include "core/comm/rendezvous_text.h"

namespace dtrain {

RendezvousRegroup::RendezvousRegroup(uint64_t generation, std::vector<PeerInfo> peers,
                                     std::vector<std::string> identities, std::vector<bool> gone,
                                     RendezvousClock::time_point now, Limits limits)
    : generation_(generation),
      peers_(std::move(peers)),
      identities_(std::move(identities)),
      state_(peers_.size()),
      started_(now),
      limits_(limits) {
  for (size_t r = 0; r < state_.size(); ++r) {
    state_[r].last_heard = now;
    state_[r].awaited = !(r < gone.size() && gone[r]);
  }
}

int RendezvousRegroup::memberOf(const JoinRequest& request) const {
  for (size_t r = 0; r < peers_.size(); ++r)
    if (peers_[r].pid == request.pid && peers_[r].host == request.host) return static_cast<int>(r);
  return -1;
}

int RendezvousRegroup::rankOfIdentity(const std::string& identity) const {
  for (size_t r = 0; r < identities_.size(); ++r)
    if (identities_[r] == identity) return static_cast<int>(r);
  return -1;
}

std::string RendezvousRegroup::describeRank(int rank) const {
  return describePeer(rank, peers_[static_cast<size_t>(rank)]);
}

void RendezvousRegroup::heardFrom(int rank, RendezvousClock::time_point now) {
  Member& m = state_[static_cast<size_t>(rank)];
  m.answered = true;
  m.last_heard = now;
}

void RendezvousRegroup::rejoined(int rank, Joiner joiner) {
  Member& m = state_[static_cast<size_t>(rank)];
  if (m.lost) return;
  m.answered = true;
  m.awaited = false;
  m.joiner = std::move(joiner);
}

void RendezvousRegroup::lose(int rank, const std::string& why) {
  Member& m = state_[static_cast<size_t>(rank)];
  if (m.lost) return;
  // One that joined again and died before the group formed is not taken in.
  m.joiner.reset();
  m.lost = true;
  m.awaited = false;
  const PeerInfo& p = peers_[static_cast<size_t>(rank)];
  losses_.push_back(Loss{rank, p.node, p.pid, p.host, why});
}

void RendezvousRegroup::tick(RendezvousClock::time_point now) {
  for (size_t r = 0; r < state_.size(); ++r) {
    const Member& m = state_[r];
    if (!m.awaited) continue;
    const int rank = static_cast<int>(r);
    if (!m.answered && now - started_ >= limits_.answer_window)
      lose(rank, "did not answer the regroup notice within " + secondsText(limits_.answer_window));
    else if (now - m.last_heard > limits_.heartbeat_timeout)
      lose(rank, "no heartbeat for " + secondsText(limits_.heartbeat_timeout));
    else if (now - started_ >= limits_.join_timeout)
      lose(rank, "did not join again within " + secondsText(limits_.join_timeout));
  }
}

bool RendezvousRegroup::settled() const {
  for (const Member& m : state_)
    if (m.awaited) return false;
  return true;
}

std::vector<Joiner> RendezvousRegroup::survivors() const {
  std::vector<Joiner> out;
  for (const Member& m : state_)
    if (m.joiner) out.push_back(*m.joiner);
  return out;
}

bool RendezvousRegroup::holds(int node, int slot) const {
  for (size_t r = 0; r < state_.size(); ++r)
    if ((state_[r].awaited || state_[r].joiner) && peers_[r].node == node && peers_[r].slot == slot)
      return true;
  return false;
}

}  // namespace dtrain
