// RendezvousRegroup: an elastic run's coordinator between two generations.
// The group that is over told its ranks to join again (RegroupNotice); each
// member is then awaited until it has joined again, or is lost: it was lost
// already, it did not answer the notice within the answer window (a killed or
// frozen process, a host cut off), or it fell silent for the heartbeat
// timeout, or it did not join by the join deadline. Once every member has
// joined or is lost, the survivors (in their old rank order) form the next
// group with any replacements the coordinator let in.
// Ownership: plain state of the coordinator; not thread-safe.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/comm/rendezvous_roster.h"
#include "core/comm/rendezvous_types.h"

namespace dtrain {

class RendezvousRegroup {
 public:
  struct Limits {
    std::chrono::milliseconds answer_window{500};
    std::chrono::milliseconds heartbeat_timeout{10000};
    std::chrono::milliseconds join_timeout{60000};
  };

  // The group that is over: its peers and routing ids by rank; `gone` ranks
  // (left cleanly) are not awaited. Started at `now`.
  RendezvousRegroup(uint64_t generation, std::vector<PeerInfo> peers, std::vector<std::string> identities,
                    std::vector<bool> gone, RendezvousClock::time_point now, Limits limits);

  uint64_t generation() const { return generation_; }
  // The old rank of the process that sent this join (same host and pid), or -1.
  int memberOf(const JoinRequest& request) const;
  // The old rank that had this routing id (its old connection still beats), or -1.
  int rankOfIdentity(const std::string& identity) const;
  bool isLost(int rank) const { return state_[static_cast<size_t>(rank)].lost; }

  void heardFrom(int rank, RendezvousClock::time_point now);
  void rejoined(int rank, Joiner joiner);
  // Lost, with why, even after joining again (a later loss of the same rank is ignored).
  void lose(int rank, const std::string& why);
  // Who did not answer in time, fell silent, or missed the join deadline.
  void tick(RendezvousClock::time_point now);

  // Every member has joined again or is lost.
  bool settled() const;
  // Those who joined again, in their old rank order.
  std::vector<Joiner> survivors() const;
  // The members lost in this regroup: "rank 3 (host b, pid 1234): why", with their nodes.
  struct Loss {
    int rank = -1;
    int node = 0;
    int pid = 0;
    std::string host;
    std::string why;
  };
  const std::vector<Loss>& losses() const { return losses_; }
  // Whether a live member (joined again or awaited) holds this node and slot.
  bool holds(int node, int slot) const;
  std::string describeRank(int rank) const;

 private:
  struct Member {
    bool awaited = true;  // neither joined again, lost, nor gone
    bool lost = false;
    bool answered = false;  // heard from since the regroup began
    RendezvousClock::time_point last_heard;
    std::optional<Joiner> joiner;
  };

  uint64_t generation_;
  std::vector<PeerInfo> peers_;
  std::vector<std::string> identities_;
  std::vector<Member> state_;
  RendezvousClock::time_point started_;
  Limits limits_;
  std::vector<Loss> losses_;
};

}  // namespace dtrain
