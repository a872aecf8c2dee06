// RendezvousCoordinator: what the rendezvous server decides, without the
// sockets. It takes frames (with the sender's routing id) and the passing of
// time, and answers with frames to send.
//
// Workers join while a group gathers (RendezvousRoster); when the last
// expected one joins, the group forms with a new generation
// (RendezvousGroup) and every joiner gets its rank. Requests are admitted only
// from members of the live group that name its generation. A join after the
// group ended (aborted, or every rank left) starts gathering the next one.
// Nothing a peer sends can make it throw: bad input is refused with a reason.
// Ownership: owned by the server's thread; not thread-safe.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/comm/rendezvous_group.h"
#include "core/comm/rendezvous_outbox.h"
#include "core/comm/rendezvous_regroup.h"
#include "core/comm/rendezvous_roster.h"
#include "core/comm/rendezvous_types.h"
#include "core/comm/wire.h"

namespace dtrain {

struct RendezvousStatus {
  uint64_t generation = 0;  // of the latest formed group; 0 before the first
  bool formed = false;      // that group formed and no new one is gathering
  bool all_left = false;    // every rank of that group left cleanly
  // Why that group aborted, or why a later gathering failed.
  std::optional<std::string> failure;
  std::vector<int> lost;  // ranks of that group lost and survived, in order
  // An elastic run: the pids of every process it lost (their hosts end those
  // still there, frozen ones say), and whether a regroup is under way.
  std::vector<int> lost_pids;
  bool regrouping = false;
};

class RendezvousCoordinator {
 public:
  // Uses job_id, token, nodes, the timeouts and log of `config`. Throws
  // CommError for a layout without workers or timeouts that are not positive.
  explicit RendezvousCoordinator(const RendezvousServerConfig& config);

  // One frame from the peer `identity`, received at `now`.
  void handle(const std::string& identity, const void* data, size_t size, RendezvousClock::time_point now,
              Outbox& out);
  // A message that is not one frame (the server sees its framing, not us).
  void refuseMalformed(const std::string& identity, const std::string& why, Outbox& out);
  // The join deadline, progress lines, and the group's deadlines. Call every
  // few tens of milliseconds.
  void tick(RendezvousClock::time_point now, Outbox& out);

  RendezvousStatus status() const;
  // The latest group's `rank` is gone (its host saw its process die): see RendezvousGroup::lose.
  void lose(int rank, const std::string& why, Outbox& out);
  // The process `pid` of node `node` in the latest group is gone (its host
  // saw it die): lost at once. An elastic run regroups without it; otherwise as lose().
  void loseProcess(int node, int pid, const std::string& why, RendezvousClock::time_point now, Outbox& out);

 private:
  // Why a request naming `job_id` with `token` is not this run's; nullopt
  // when it is. The token is never echoed: logs and replies may be seen by others.
  struct CredentialsRefusal {
    std::string reason;
    bool wrong_job = false;  // else a wrong token
  };
  std::optional<CredentialsRefusal> checkCredentials(const std::string& job_id,
                                                     const std::string& token) const;
  void handleJoin(const std::string& identity, uint64_t request_id, const JoinRequest& request,
                  RendezvousClock::time_point now, Outbox& out);
  void handleHeartbeat(const std::string& identity, uint64_t request_id, const wire::Heartbeat& beat,
                       RendezvousClock::time_point now, Outbox& out);
  // The sender's rank when it may make a request of `generation` now;
  // otherwise sends the refusal (logged unless `quiet`) and returns -1.
  int admit(const std::string& identity, uint64_t request_id, wire::MessageType type, uint64_t generation,
            bool quiet, RendezvousClock::time_point now, Outbox& out);
  void form(RendezvousClock::time_point now, Outbox& out);
  void tickGathering(RendezvousClock::time_point now, Outbox& out);

  // Elastic runs (rendezvous_coordinator_elastic.cpp).
  // A join once the first group has formed: a member joining again, or a
  // replacement. False when the latest group has ended for good (the join
  // then starts gathering a new run).
  bool handleElasticJoin(const std::string& identity, uint64_t request_id, const JoinRequest& request,
                         RendezvousClock::time_point now, Outbox& out);
  void park(const Joiner& joiner, RendezvousClock::time_point now, Outbox& out);
  // Ends the live group; its ranks in `losses` are lost, the others awaited.
  void beginRegroup(const std::string& reason, const std::vector<std::pair<int, std::string>>& losses,
                    RendezvousClock::time_point now, Outbox& out);
  void finishRegroupIfSettled(RendezvousClock::time_point now, Outbox& out);
  void formElastic(std::vector<Joiner> members, const std::string& change, const std::string& stop,
                   RendezvousClock::time_point now, Outbox& out);
  void tickElastic(RendezvousClock::time_point now, Outbox& out);
  bool cooling(int node, RendezvousClock::time_point now) const;
  // Notes the regroup's losses against the restart and cool-down limits.
  void countLosses(RendezvousClock::time_point now);

  std::string describeSender(const std::string& identity) const;
  void log(const std::string& line) const;

  RendezvousServerConfig config_;
  RendezvousRoster roster_;
  bool gathering_ = true;
  RendezvousClock::time_point gathering_since_;  // the first join of this gathering
  RendezvousClock::time_point last_progress_line_;
  std::optional<std::string> join_failure_;  // of a gathering after the latest group

  std::optional<RendezvousGroup> group_;  // the latest formed
  uint64_t next_generation_ = 1;

  std::optional<RendezvousRegroup> regroup_;  // between two generations of an elastic run
  struct Waiting {
    Joiner joiner;
    RendezvousClock::time_point since;
  };
  std::vector<Waiting> waiting_;                      // replacements not yet taken in
  std::deque<RendezvousClock::time_point> restarts_;  // regroups after losses, within the window
  std::map<int, std::deque<RendezvousClock::time_point>> node_losses_;
  std::map<int, RendezvousClock::time_point> cooling_until_;
  std::vector<int> lost_pids_;
};

}  // namespace dtrain
