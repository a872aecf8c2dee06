#include "core/comm/rendezvous_coordinator.h"

#include <type_traits>
#include <utility>

#include "core/comm/rendezvous_text.h"
#include "core/errors.h"

namespace dtrain {

namespace {

using std::chrono::milliseconds;

// Compares without an early exit, so timing does not reveal how much of a guess was right.
bool sameToken(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

std::optional<uint64_t> generationOf(const wire::Body& body) {
  return std::visit(
      [](const auto& m) -> std::optional<uint64_t> {
        if constexpr (std::is_base_of_v<wire::GroupRequest, std::decay_t<decltype(m)>>) return m.generation;
        return std::nullopt;
      },
      body);
}

std::string describeJoiner(const JoinRequest& r) {
  return "host " + r.host + " pid " + std::to_string(r.pid) + " (node " + std::to_string(r.node) + ", slot " +
         std::to_string(r.slot) + ")";
}

}  // namespace

RendezvousCoordinator::RendezvousCoordinator(const RendezvousServerConfig& config)
    : config_(config), roster_(config.nodes) {
  if (config_.join_timeout.count() <= 0 || config_.heartbeat_timeout.count() <= 0 ||
      config_.progress_interval.count() <= 0)
    throw CommError(
        "the rendezvous join timeout, heartbeat timeout and progress interval must be positive (got " +
        secondsText(config_.join_timeout) + ", " + secondsText(config_.heartbeat_timeout) + ", " +
        secondsText(config_.progress_interval) + ")");
}

void RendezvousCoordinator::log(const std::string& line) const {
  if (config_.log) config_.log(line);
}

std::string RendezvousCoordinator::describeSender(const std::string& identity) const {
  if (group_) {
    int rank = group_->rankOf(identity);
    if (rank >= 0) return group_->describeRank(rank);
  }
  if (gathering_) {
    int rank = roster_.rankOfIdentity(identity);
    if (rank >= 0) return describeJoiner(roster_.joiners()[static_cast<size_t>(rank)]->request);
  }
  return "an unknown peer";
}

RendezvousStatus RendezvousCoordinator::status() const {
  RendezvousStatus s;
  if (group_) {
    s.generation = group_->generation();
    s.formed = !gathering_;
    s.all_left = group_->allLeft();
    s.failure = group_->abortReason();
    s.lost = group_->lostRanks();
  }
  if (join_failure_) s.failure = join_failure_;
  s.lost_pids = lost_pids_;
  s.regrouping = regroup_.has_value();
  return s;
}

void RendezvousCoordinator::refuseMalformed(const std::string& identity, const std::string& why,
                                            Outbox& out) {
  log("refused a message from " + describeSender(identity) + ": " + why);
  out.refuse(identity, 0, "malformed rendezvous message: " + why);
}

void RendezvousCoordinator::handle(const std::string& identity, const void* data, size_t size,
                                   RendezvousClock::time_point now, Outbox& out) {
  wire::Message msg;
  try {
    msg = wire::decode(data, size);
  } catch (const wire::WireError& e) {
    uint64_t request_id = 0;
    std::string reason = std::string("malformed rendezvous message: ") + e.what();
    try {
      wire::Header h = wire::decodeHeader(data, size);
      request_id = h.request_id;
      if (h.version != wire::kProtocolVersion)
        reason = "the worker speaks rendezvous protocol version " + std::to_string(h.version) +
                 " but this coordinator speaks version " + std::to_string(wire::kProtocolVersion) +
                 ": run the same dtrain version on every host";
    } catch (const wire::WireError&) {
      // Not even a header: the answer carries request id 0.
    }
    log("refused a message from " + describeSender(identity) + ": " + reason);
    out.refuse(identity, request_id, reason);
    return;
  }

  wire::MessageType type = wire::typeOf(msg.body);
  if (auto* join = std::get_if<wire::Join>(&msg.body))
    return handleJoin(identity, msg.request_id, join->request, now, out);
  if (auto* beat = std::get_if<wire::Heartbeat>(&msg.body))
    return handleHeartbeat(identity, msg.request_id, *beat, now, out);
  if (auto* lost = std::get_if<wire::ReportLost>(&msg.body)) {
    if (auto refusal = checkCredentials(lost->job_id, lost->token)) {
      log("refused a report of a lost worker: " + refusal->reason);
      return out.refuse(identity, msg.request_id, refusal->reason);
    }
    loseProcess(lost->node, lost->pid, lost->why, now, out);
    return out.send(identity, msg.request_id, wire::Ok{});
  }
  std::optional<uint64_t> generation = generationOf(msg.body);
  if (!generation) {
    std::string why = std::string("unexpected '") + wire::messageTypeName(type) +
                      "' message: the coordinator only takes worker requests";
    log("refused a message from " + describeSender(identity) + ": " + why);
    return out.refuse(identity, msg.request_id, why);
  }
  int rank = admit(identity, msg.request_id, type, *generation, false, now, out);
  if (rank >= 0) group_->handle(rank, identity, msg.request_id, msg.body, now, out);
}

std::optional<RendezvousCoordinator::CredentialsRefusal> RendezvousCoordinator::checkCredentials(
    const std::string& job_id, const std::string& token) const {
  if (job_id != config_.job_id)
    return CredentialsRefusal{
        "this coordinator serves job " + quoted(config_.job_id) + ", not " + quoted(job_id), true};
  if (!sameToken(token, config_.token))
    return CredentialsRefusal{"wrong token for job " + quoted(config_.job_id)};
  return std::nullopt;
}

void RendezvousCoordinator::handleJoin(const std::string& identity, uint64_t request_id, const JoinRequest& r,
                                       RendezvousClock::time_point now, Outbox& out) {
  auto refuseJoin = [&](const std::string& reason) {
    log("refused the join of " + describeJoiner(r) + ": " + reason);
    out.refuse(identity, request_id, reason);
  };
  if (auto refusal = checkCredentials(r.job_id, r.token))
    return refuseJoin(refusal->reason + (refusal->wrong_job
                                             ? ": check the coordinator address in the job's [cluster] table"
                                             : ": every host of a run must use the same job token"));
  if (config_.elastic.enabled && group_ && !gathering_ &&
      handleElasticJoin(identity, request_id, r, now, out))
    return;
  if (!gathering_) {
    if (group_->live())
      return refuseJoin("the group of generation " + std::to_string(group_->generation()) +
                        " has already formed with all " + std::to_string(group_->worldSize()) +
                        " workers; a late worker cannot join a running group (restart the run to change its "
                        "workers)");
    // The latest group has ended: this join starts gathering the next one.
    gathering_ = true;
    roster_.clear();
  }
  if (int rank = roster_.rankOfIdentity(identity); rank >= 0)
    return refuseJoin("this worker has already joined as rank " + std::to_string(rank));
  if (auto why = roster_.refusal(r)) return refuseJoin(*why);

  if (roster_.joinedCount() == 0) gathering_since_ = last_progress_line_ = now;
  roster_.add(Joiner{identity, request_id, r});
  if (roster_.complete()) form(now, out);
}

void RendezvousCoordinator::form(RendezvousClock::time_point now, Outbox& out) {
  std::vector<std::string> identities;
  for (const auto& j : roster_.joiners()) identities.push_back(j->identity);
  group_.emplace(next_generation_++, roster_.peers(), identities, config_.heartbeat_timeout, config_.log, now,
                 config_.survivable, config_.max_survivable_losses);
  if (config_.elastic.enabled) group_->setElastic();
  gathering_ = false;
  join_failure_.reset();

  Membership m;
  m.world_size = group_->worldSize();
  m.generation = group_->generation();
  m.peers = roster_.peers();
  for (int rank = 0; rank < m.world_size; ++rank) {
    m.rank = rank;
    const Joiner& j = *roster_.joiners()[static_cast<size_t>(rank)];
    out.send(j.identity, j.request_id, wire::Welcome{m});
  }
  log("group formed: generation " + std::to_string(m.generation) + ", " + std::to_string(m.world_size) +
      " workers on " + std::to_string(roster_.nodeCount()) + " node(s)");
}

void RendezvousCoordinator::handleHeartbeat(const std::string& identity, uint64_t request_id,
                                            const wire::Heartbeat& beat, RendezvousClock::time_point now,
                                            Outbox& out) {
  // A rank of a group that is over beats on while it leaves its step to join again.
  if (regroup_) {
    if (int rank = regroup_->rankOfIdentity(identity); rank >= 0) {
      regroup_->heardFrom(rank, now);
      return out.send(identity, request_id, wire::Ok{});
    }
  }
  // A worker waiting for its group beats with generation 0 ...
  if (gathering_ && roster_.rankOfIdentity(identity) >= 0) return out.send(identity, request_id, wire::Ok{});
  // ... and may still do so just after the group formed, before it read its welcome.
  uint64_t generation = beat.generation;
  if (generation == 0 && group_ && group_->rankOf(identity) >= 0) generation = group_->generation();
  // Refusals of heartbeats are not logged: a confused worker repeats them every interval.
  if (admit(identity, request_id, wire::MessageType::kHeartbeat, generation, true, now, out) >= 0)
    out.send(identity, request_id, wire::Ok{});
}

int RendezvousCoordinator::admit(const std::string& identity, uint64_t request_id, wire::MessageType type,
                                 uint64_t generation, bool quiet, RendezvousClock::time_point now,
                                 Outbox& out) {
  std::string why;
  int rank = -1;
  uint64_t current = group_ ? group_->generation() : 0;
  if (!group_) {
    why = "no group has formed yet: a worker must join before it sends a " +
          std::string(wire::messageTypeName(type));
  } else if (generation < current) {
    why = "stale generation " + std::to_string(generation) + ", the run is at " + std::to_string(current) +
          ": this worker belongs to an earlier group and must rejoin";
  } else if (generation > current) {
    why = "unknown generation " + std::to_string(generation) + ", the run is at " + std::to_string(current);
  } else if (!group_->live()) {
    why = group_->endReason();
  } else if ((rank = group_->rankOf(identity)) < 0) {
    why = "this connection has not joined generation " + std::to_string(current) +
          ": a worker must join before it sends a " + wire::messageTypeName(type);
  } else if (group_->hasLeft(rank)) {
    why = "rank " + std::to_string(rank) + " has already left the run";
  } else {
    group_->heardFrom(rank, now);
    return rank;
  }
  if (!quiet)
    log("refused a " + std::string(wire::messageTypeName(type)) + " from " + describeSender(identity) + ": " +
        why);
  out.refuse(identity, request_id, why);
  return -1;
}

void RendezvousCoordinator::lose(int rank, const std::string& why, Outbox& out) {
  if (group_ && !gathering_) group_->lose(rank, why, out);
}

void RendezvousCoordinator::tick(RendezvousClock::time_point now, Outbox& out) {
  if (gathering_) tickGathering(now, out);
  if (group_) group_->tick(now, out);
  if (config_.elastic.enabled) tickElastic(now, out);
}

void RendezvousCoordinator::tickGathering(RendezvousClock::time_point now, Outbox& out) {
  if (roster_.joinedCount() == 0) return;
  milliseconds waited = std::chrono::duration_cast<milliseconds>(now - gathering_since_);
  if (waited >= config_.join_timeout) {
    std::string reason = "the group did not form within " + secondsText(config_.join_timeout) +
                         ": still waiting for " + roster_.describeMissing() +
                         " (is dtrain running on those hosts, and can they reach the coordinator?)";
    log(reason);
    for (const auto& j : roster_.joiners())
      if (j) out.refuse(j->identity, j->request_id, reason);
    join_failure_ = reason;
    roster_.clear();
  } else if (now - last_progress_line_ >= config_.progress_interval) {
    last_progress_line_ = now;
    log("waiting for " + roster_.describeMissing() + " (" + secondsText(config_.join_timeout - waited) +
        " left before the join deadline)");
  }
}

}  // namespace dtrain
