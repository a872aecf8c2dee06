// The coordinator's side of in-job recovery ([cluster] elastic): a lost rank
// ends its group; the survivors join again and form the next generation,
// with the replacements waiting then; the policy limits (min_workers,
// max_restarts, a node's cool-down) are applied as the next group forms.
#include <algorithm>
#include <utility>

#include "core/comm/rendezvous_coordinator.h"
#include "core/comm/rendezvous_text.h"

namespace dtrain {
namespace {

std::string describeJoiner(const JoinRequest& r) {
  return "node " + std::to_string(r.node) + " slot " + std::to_string(r.slot) + " (host " + r.host +
         ", pid " + std::to_string(r.pid) + ")";
}

template <typename Clock>
void dropBefore(std::deque<Clock>& times, Clock limit) {
  while (!times.empty() && times.front() < limit) times.pop_front();
}

}  // namespace

bool RendezvousCoordinator::handleElasticJoin(const std::string& identity, uint64_t request_id,
                                              const JoinRequest& r, RendezvousClock::time_point now,
                                              Outbox& out) {
  Joiner joiner{identity, request_id, r};
  if (regroup_) {
    const int old = regroup_->memberOf(r);
    if (old >= 0 && !regroup_->isLost(old)) {
      regroup_->rejoined(old, std::move(joiner));
      finishRegroupIfSettled(now, out);
    } else {
      park(joiner, now, out);
    }
    return true;
  }
  if (!group_->live()) return false;
  int old = -1;
  for (int rank = 0; rank < group_->worldSize() && old < 0; ++rank) {
    const PeerInfo& p = group_->peers()[static_cast<size_t>(rank)];
    if (p.pid == r.pid && p.host == r.host && !group_->hasLeft(rank)) old = rank;
  }
  if (old < 0) {
    park(joiner, now, out);
    return true;
  }
  // Its collectives failed (a peer is gone), or replacements wait: either
  // way the group re-forms with whoever answers.
  beginRegroup(group_->describeRank(old) + " asked to re-form the group", {}, now, out);
  regroup_->rejoined(old, std::move(joiner));
  finishRegroupIfSettled(now, out);
  return true;
}

void RendezvousCoordinator::park(const Joiner& joiner, RendezvousClock::time_point now, Outbox& out) {
  const JoinRequest& r = joiner.request;
  auto refuse = [&](const std::string& why) {
    log("refused the join of " + describeJoiner(r) + ": " + why);
    out.refuse(joiner.identity, joiner.request_id, why);
  };
  if (r.node < 0 || r.node >= static_cast<int>(config_.nodes.size()))
    return refuse("node index " + std::to_string(r.node) + " is out of range: the job has " +
                  std::to_string(config_.nodes.size()) + " node(s)");
  if (r.slot < 0 || r.slot >= config_.nodes[static_cast<size_t>(r.node)].slots)
    return refuse("slot " + std::to_string(r.slot) + " is out of range for node " + std::to_string(r.node));
  bool held = regroup_ ? regroup_->holds(r.node, r.slot) : false;
  if (!regroup_ && group_ && group_->live())
    for (int rank = 0; rank < group_->worldSize(); ++rank) {
      const PeerInfo& p = group_->peers()[static_cast<size_t>(rank)];
      held = held || (p.node == r.node && p.slot == r.slot && !group_->hasLeft(rank));
    }
  for (const Waiting& w : waiting_)
    held = held || (w.joiner.request.node == r.node && w.joiner.request.slot == r.slot);
  if (held)
    return refuse("node " + std::to_string(r.node) + " slot " + std::to_string(r.slot) +
                  " is taken by a running worker of this run; a replacement takes the place of a lost one");
  waiting_.push_back(Waiting{joiner, now});
  log("replacement " + describeJoiner(r) + " waits to join at the next step boundary" +
      (cooling(r.node, now) ? " (node " + std::to_string(r.node) + " is left out for a cool-down)" : ""));
}

bool RendezvousCoordinator::cooling(int node, RendezvousClock::time_point now) const {
  auto it = cooling_until_.find(node);
  return it != cooling_until_.end() && now < it->second;
}

void RendezvousCoordinator::beginRegroup(const std::string& reason,
                                         const std::vector<std::pair<int, std::string>>& losses,
                                         RendezvousClock::time_point now, Outbox& out) {
  std::vector<bool> gone;
  for (int rank = 0; rank < group_->worldSize(); ++rank) gone.push_back(group_->hasLeft(rank));
  RendezvousRegroup::Limits limits;
  limits.answer_window = config_.elastic.answer_window;
  limits.heartbeat_timeout = config_.heartbeat_timeout;
  limits.join_timeout = config_.join_timeout;
  regroup_.emplace(group_->generation(), group_->peers(), group_->identities(), gone, now, limits);
  for (const auto& [rank, why] : losses) regroup_->lose(rank, why);
  log("generation " + std::to_string(group_->generation()) + " is over: " + reason +
      "; the survivors form the next");
  group_->endForRegroup(reason, out);
}

void RendezvousCoordinator::countLosses(RendezvousClock::time_point now) {
  const auto window = config_.elastic.restart_window;
  dropBefore(restarts_, now - window);
  if (regroup_->losses().empty()) return;
  restarts_.push_back(now);
  std::vector<int> nodes;  // a node counts once per regroup, however many of its workers were lost
  for (const RendezvousRegroup::Loss& loss : regroup_->losses()) {
    lost_pids_.push_back(loss.pid);
    if (std::find(nodes.begin(), nodes.end(), loss.node) != nodes.end()) continue;
    nodes.push_back(loss.node);
    auto& times = node_losses_[loss.node];
    dropBefore(times, now - window);
    times.push_back(now);
    if (times.size() >= 2 && config_.elastic.host_cooldown.count() > 0 && !cooling(loss.node, now)) {
      cooling_until_[loss.node] = now + config_.elastic.host_cooldown;
      log("node " + std::to_string(loss.node) + " (host " + loss.host + ") lost workers " +
          std::to_string(times.size()) + " times within " + secondsText(window) + ": its replacements wait " +
          secondsText(config_.elastic.host_cooldown) + " before joining");
    }
  }
}

void RendezvousCoordinator::finishRegroupIfSettled(RendezvousClock::time_point now, Outbox& out) {
  if (!regroup_ || !regroup_->settled()) return;
  const uint64_t over = regroup_->generation();
  std::string lost;
  for (const RendezvousRegroup::Loss& loss : regroup_->losses())
    lost += (lost.empty() ? "" : "; ") + regroup_->describeRank(loss.rank) + ": " + loss.why;
  std::vector<Joiner> members = regroup_->survivors();
  if (members.empty()) {
    std::string reason = "every rank of generation " + std::to_string(over) + " was lost (" + lost + ")";
    log(reason);
    join_failure_ = reason;
    for (const Waiting& w : waiting_) out.refuse(w.joiner.identity, w.joiner.request_id, reason);
    waiting_.clear();
    countLosses(now);
    regroup_.reset();
    return;
  }
  countLosses(now);
  // Replacements fill places no survivor holds, in node and slot order.
  std::sort(waiting_.begin(), waiting_.end(), [](const Waiting& a, const Waiting& b) {
    return std::make_pair(a.joiner.request.node, a.joiner.request.slot) <
           std::make_pair(b.joiner.request.node, b.joiner.request.slot);
  });
  std::string joined;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const JoinRequest& r = it->joiner.request;
    bool held = false;
    for (const Joiner& m : members) held = held || (m.request.node == r.node && m.request.slot == r.slot);
    if (held || cooling(r.node, now)) {
      ++it;
      continue;
    }
    joined += (joined.empty() ? "" : ", ") + describeJoiner(r);
    members.push_back(it->joiner);
    it = waiting_.erase(it);
  }
  const int workers = static_cast<int>(members.size());
  std::string stop;
  if (workers < config_.elastic.min_workers)
    stop = "only " + std::to_string(workers) + " worker(s) remain, fewer than [strategy] min_workers = " +
           std::to_string(config_.elastic.min_workers);
  else if (static_cast<int>(restarts_.size()) > config_.elastic.max_restarts)
    stop = "the run lost workers " + std::to_string(restarts_.size()) + " times within " +
           secondsText(config_.elastic.restart_window) +
           ", more than [cluster] max_restarts = " + std::to_string(config_.elastic.max_restarts);
  std::string change =
      "generation " + std::to_string(next_generation_) + ": " + std::to_string(workers) + " worker(s)";
  if (!lost.empty()) change += "; lost " + lost;
  if (!joined.empty()) change += "; joined " + joined;
  regroup_.reset();
  formElastic(std::move(members), change, stop, now, out);
}

void RendezvousCoordinator::formElastic(std::vector<Joiner> members, const std::string& change,
                                        const std::string& stop, RendezvousClock::time_point now,
                                        Outbox& out) {
  std::vector<PeerInfo> peers;
  std::vector<std::string> identities;
  for (const Joiner& j : members) {
    peers.push_back(
        PeerInfo{j.request.host, j.request.node, j.request.slot, j.request.pid, j.request.local_devices});
    identities.push_back(j.identity);
  }
  group_.emplace(next_generation_++, peers, identities, config_.heartbeat_timeout, config_.log, now);
  group_->setElastic();
  group_->setKey(kElasticChangeKey, Bytes(change.begin(), change.end()), out);
  if (!stop.empty()) group_->setKey(kElasticStopKey, Bytes(stop.begin(), stop.end()), out);
  join_failure_.reset();
  Membership m;
  m.world_size = group_->worldSize();
  m.generation = group_->generation();
  m.peers = peers;
  for (int rank = 0; rank < m.world_size; ++rank) {
    m.rank = rank;
    const Joiner& j = members[static_cast<size_t>(rank)];
    out.send(j.identity, j.request_id, wire::Welcome{m});
  }
  log("group formed: " + change + (stop.empty() ? "" : "; the run stops with a checkpoint: " + stop));
}

void RendezvousCoordinator::tickElastic(RendezvousClock::time_point now, Outbox& out) {
  if (group_ && group_->live() && !regroup_) {
    std::vector<std::pair<int, std::string>> losses = group_->takeRegroupLosses();
    if (!losses.empty())
      beginRegroup("lost " + group_->describeRank(losses.front().first) + ": " + losses.front().second,
                   losses, now, out);
  }
  if (regroup_) {
    regroup_->tick(now);
    finishRegroupIfSettled(now, out);
  }
  if (group_ && group_->allLeft()) {
    for (const Waiting& w : waiting_) {
      log("refused the join of replacement " + describeJoiner(w.joiner.request) + ": the run has ended");
      out.refuse(w.joiner.identity, w.joiner.request_id,
                 "the run ended before this worker could join it (it finished on the others)");
    }
    waiting_.clear();
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (now - it->since < config_.join_timeout) {
      ++it;
      continue;
    }
    const JoinRequest& r = it->joiner.request;
    std::string why = "the run did not take this worker in within " + secondsText(config_.join_timeout) +
                      (cooling(r.node, now) ? ": node " + std::to_string(r.node) +
                                                  " is left out for a cool-down after repeated failures"
                                            : "");
    log("refused the join of replacement " + describeJoiner(r) + ": " + why);
    out.refuse(it->joiner.identity, it->joiner.request_id, why);
    it = waiting_.erase(it);
  }
  if (!group_ || !group_->live() || regroup_ || group_->hasKey(kElasticWaitingKey)) return;
  for (const Waiting& w : waiting_)
    if (!cooling(w.joiner.request.node, now)) {
      group_->setKey(kElasticWaitingKey, Bytes{1}, out);
      return;
    }
}

void RendezvousCoordinator::loseProcess(int node, int pid, const std::string& why,
                                        RendezvousClock::time_point now, Outbox& out) {
  if (!group_ || gathering_) return;
  int rank = -1;
  for (int r = 0; r < static_cast<int>(group_->peers().size()) && rank < 0; ++r) {
    const PeerInfo& p = group_->peers()[static_cast<size_t>(r)];
    if (p.pid == pid && p.node == node) rank = r;
  }
  if (rank < 0) return;
  if (!config_.elastic.enabled) return group_->lose(rank, why, out);
  if (regroup_) {
    regroup_->lose(rank, why);
    return finishRegroupIfSettled(now, out);
  }
  if (group_->live() && !group_->hasLeft(rank))
    beginRegroup("lost " + group_->describeRank(rank) + ": " + why, {{rank, why}}, now, out);
}

}  // namespace dtrain
