// RendezvousGroup: one formed generation on the coordinator. Its ranks'
// key-value table and barriers, their heartbeats, an abort (told to every
// rank still in the group, failing whatever waits) and their leaving. A
// group ends aborted, with every rank gone, or (an elastic run) handed over
// to a regroup; it is never revived (the next group gets a new generation).
// Ownership: owned by RendezvousCoordinator; not thread-safe.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/comm/rendezvous_barriers.h"
#include "core/comm/rendezvous_key_values.h"
#include "core/comm/rendezvous_outbox.h"
#include "core/comm/rendezvous_types.h"
#include "core/comm/wire.h"

namespace dtrain {

class RendezvousGroup {
 public:
  // `peers` and `identities` by rank; every rank counts as heard from at `now`.
  // `survivable` and `max_survivable_losses` as in RendezvousServerConfig.
  RendezvousGroup(uint64_t generation, std::vector<PeerInfo> peers, std::vector<std::string> identities,
                  std::chrono::milliseconds heartbeat_timeout, RendezvousLog log,
                  RendezvousClock::time_point now, std::vector<bool> survivable = {},
                  int max_survivable_losses = 0);

  uint64_t generation() const { return generation_; }
  int worldSize() const { return static_cast<int>(peers_.size()); }
  // Neither aborted nor left by every rank.
  bool live() const { return end_reason_.empty(); }
  // Why the group ended, as the answer to requests that come after.
  const std::string& endReason() const { return end_reason_; }
  const std::optional<std::string>& abortReason() const { return abort_reason_; }
  bool allLeft() const { return left_count_ == worldSize(); }

  // The rank of the member with this routing id, or -1.
  int rankOf(const std::string& identity) const;
  bool hasLeft(int rank) const { return left_[static_cast<size_t>(rank)]; }
  void heardFrom(int rank, RendezvousClock::time_point now) { last_seen_[static_cast<size_t>(rank)] = now; }
  // "rank 3 (host B, pid 1234)"
  std::string describeRank(int rank) const;

  // A key-value, barrier, abort or leave request of a member that has not
  // left, while the group is live.
  void handle(int rank, const std::string& identity, uint64_t request_id, const wire::Body& body,
              RendezvousClock::time_point now, Outbox& out);
  // Deadlines of parked reads and barriers; ranks silent past the heartbeat timeout.
  void tick(RendezvousClock::time_point now, Outbox& out);
  // `rank` is gone (its process died, say, as its host saw): dropped and
  // announced when the group survives its loss, else the group aborts.
  void lose(int rank, const std::string& why, Outbox& out);
  // Ranks lost and survived so far.
  int lostCount() const { return static_cast<int>(lost_.size()); }
  const std::vector<int>& lostRanks() const { return lost_; }

  // An elastic run: a lost rank neither aborts the group nor is dropped from
  // it; it waits in takeRegroupLosses() for the coordinator to regroup.
  void setElastic() { elastic_ = true; }
  std::vector<std::pair<int, std::string>> takeRegroupLosses() { return std::move(regroup_losses_); }
  // Ends the group for a regroup: every rank still in it gets a
  // RegroupNotice, parked reads and barriers are refused with `reason`.
  void endForRegroup(const std::string& reason, Outbox& out);
  // Sets a key as a rank's set would (parked reads of it are answered).
  void setKey(const std::string& key, const Bytes& value, Outbox& out);
  bool hasKey(const std::string& key) const { return key_values_.find(key) != nullptr; }
  const std::vector<PeerInfo>& peers() const { return peers_; }
  const std::vector<std::string>& identities() const { return identities_; }

 private:
  void leave(int rank, const std::string& identity, uint64_t request_id, Outbox& out);
  void abort(const std::string& reason, int origin_rank, Outbox& out);
  // Drops a lost rank the group survives: announced under kLostRanksKey.
  void dropLost(int rank, const std::string& why, Outbox& out);
  void answerParkedReads(Outbox& out);
  std::string describeRanks(const std::vector<int>& ranks) const;
  void log(const std::string& line) const;

  uint64_t generation_;
  std::vector<PeerInfo> peers_;
  std::vector<std::string> identities_;
  std::unordered_map<std::string, int> rank_of_identity_;
  std::chrono::milliseconds heartbeat_timeout_;
  RendezvousLog log_;

  RendezvousKeyValues key_values_;
  RendezvousBarriers barriers_;
  std::vector<RendezvousClock::time_point> last_seen_;
  std::vector<bool> left_;  // left cleanly, or lost and dropped
  int left_count_ = 0;
  std::vector<bool> survivable_;
  int max_survivable_losses_ = 0;
  std::vector<int> lost_;   // in the order they were lost
  std::string lost_ranks_;  // kLostRanksKey's value
  std::string end_reason_;
  std::optional<std::string> abort_reason_;
  bool elastic_ = false;
  std::vector<std::pair<int, std::string>> regroup_losses_;  // (rank, why), not yet taken
};

}  // namespace dtrain
