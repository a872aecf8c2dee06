#include "core/comm/rendezvous_group.h"

#include <utility>

#include "core/comm/rendezvous_text.h"
#include "core/errors.h"

namespace dtrain {

namespace {

using std::chrono::milliseconds;

// An abort reason goes to every rank and into logs: a line, not a dump.
constexpr size_t kMaxReasonBytes = 2000;
// A stall report stays one readable line at any scale.
constexpr size_t kRanksListed = 8;

std::string keyList(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", " : "") + quoted(keys[i]);
  return s;
}

}  // namespace

RendezvousGroup::RendezvousGroup(uint64_t generation, std::vector<PeerInfo> peers,
                                 std::vector<std::string> identities, milliseconds heartbeat_timeout,
                                 RendezvousLog log, RendezvousClock::time_point now,
                                 std::vector<bool> survivable, int max_survivable_losses)
    : generation_(generation),
      peers_(std::move(peers)),
      identities_(std::move(identities)),
      heartbeat_timeout_(heartbeat_timeout),
      log_(std::move(log)),
      last_seen_(peers_.size(), now),
      left_(peers_.size(), false),
      survivable_(std::move(survivable)),
      max_survivable_losses_(max_survivable_losses) {
  survivable_.resize(peers_.size(), false);
  for (size_t r = 0; r < identities_.size(); ++r) rank_of_identity_[identities_[r]] = static_cast<int>(r);
}

void RendezvousGroup::log(const std::string& line) const {
  if (log_) log_(line);
}

int RendezvousGroup::rankOf(const std::string& identity) const {
  auto it = rank_of_identity_.find(identity);
  return it == rank_of_identity_.end() ? -1 : it->second;
}

std::string RendezvousGroup::describeRank(int rank) const {
  return describePeer(rank, peers_[static_cast<size_t>(rank)]);
}

std::string RendezvousGroup::describeRanks(const std::vector<int>& ranks) const {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < kRanksListed; ++i) s += (i ? ", " : "") + describeRank(ranks[i]);
  if (ranks.size() > kRanksListed) s += " and " + std::to_string(ranks.size() - kRanksListed) + " more";
  return s;
}

void RendezvousGroup::handle(int rank, const std::string& identity, uint64_t request_id,
                             const wire::Body& body, RendezvousClock::time_point now, Outbox& out) {
  auto park = [&](std::vector<std::string> keys, bool wants_value, uint32_t timeout_ms) {
    ParkedRead p;
    p.identity = identity;
    p.request_id = request_id;
    p.rank = rank;
    p.keys = std::move(keys);
    p.wants_value = wants_value;
    p.timeout = milliseconds(timeout_ms);
    p.deadline = now + p.timeout;
    key_values_.park(std::move(p));
  };

  if (auto* m = std::get_if<wire::Set>(&body)) {
    key_values_.set(m->key, m->value);
    out.send(identity, request_id, wire::Ok{});
    answerParkedReads(out);
  } else if (auto* m = std::get_if<wire::Add>(&body)) {
    try {
      int64_t value = key_values_.add(m->key, m->delta);
      out.send(identity, request_id, wire::Number{value});
      answerParkedReads(out);
    } catch (const CommError& e) {
      out.refuse(identity, request_id, e.what());
    }
  } else if (auto* m = std::get_if<wire::Check>(&body)) {
    out.send(identity, request_id, wire::Flag{key_values_.find(m->key) != nullptr});
  } else if (auto* m = std::get_if<wire::Get>(&body)) {
    if (const Bytes* v = key_values_.find(m->key)) return out.send(identity, request_id, wire::Value{*v});
    park({m->key}, true, m->timeout_ms);
  } else if (auto* m = std::get_if<wire::Wait>(&body)) {
    if (key_values_.missing(m->keys).empty()) return out.send(identity, request_id, wire::Ok{});
    park(m->keys, false, m->timeout_ms);
  } else if (auto* m = std::get_if<wire::Barrier>(&body)) {
    milliseconds timeout(m->timeout_ms);
    BarrierArrival a{identity, request_id, rank, timeout, now + timeout};
    for (const BarrierArrival& done : barriers_.arrive(m->name, a, worldSize()))
      out.send(done.identity, done.request_id, wire::Ok{});
  } else if (auto* m = std::get_if<wire::Abort>(&body)) {
    out.send(identity, request_id, wire::Ok{});
    std::string reason =
        m->reason.size() <= kMaxReasonBytes ? m->reason : m->reason.substr(0, kMaxReasonBytes) + "...";
    abort("rank " + std::to_string(rank) + " (host " + peers_[static_cast<size_t>(rank)].host +
              ") aborted the run: " + reason,
          rank, out);
  } else if (std::holds_alternative<wire::Leave>(body)) {
    leave(rank, identity, request_id, out);
  }
}

void RendezvousGroup::leave(int rank, const std::string& identity, uint64_t request_id, Outbox& out) {
  left_[static_cast<size_t>(rank)] = true;
  ++left_count_;
  out.send(identity, request_id, wire::Ok{});
  for (const StrandedArrival& s : barriers_.takeWaitingFor(rank, worldSize()))
    out.refuse(s.arrival.identity, s.arrival.request_id,
               "barrier " + quoted(s.name) + " cannot complete: " + describeRank(rank) +
                   " left the run before reaching it");
  if (!allLeft()) return;
  end_reason_ = "the run of generation " + std::to_string(generation_) + " has ended: every rank left";
  key_values_.takeAll();  // their askers have all left
  log("every rank has left generation " + std::to_string(generation_) + ": the run ended cleanly");
}

void RendezvousGroup::answerParkedReads(Outbox& out) {
  for (const ParkedRead& p : key_values_.takeSatisfied()) {
    if (p.wants_value)
      out.send(p.identity, p.request_id, wire::Value{*key_values_.find(p.keys.front())});
    else
      out.send(p.identity, p.request_id, wire::Ok{});
  }
}

void RendezvousGroup::abort(const std::string& reason, int origin_rank, Outbox& out) {
  end_reason_ = "the run of generation " + std::to_string(generation_) + " was aborted: " + reason;
  abort_reason_ = reason;
  log("aborting generation " + std::to_string(generation_) + ": " + reason);
  wire::AbortNotice notice;
  notice.origin_rank = origin_rank;
  notice.origin_host = origin_rank >= 0 ? peers_[static_cast<size_t>(origin_rank)].host : std::string();
  notice.reason = reason;
  for (size_t r = 0; r < identities_.size(); ++r)
    if (!left_[r] && static_cast<int>(r) != origin_rank) out.send(identities_[r], 0, notice);
  for (const ParkedRead& p : key_values_.takeAll()) out.refuse(p.identity, p.request_id, reason);
  for (const StrandedArrival& s : barriers_.takeAll(worldSize()))
    out.refuse(s.arrival.identity, s.arrival.request_id, reason);
}

void RendezvousGroup::tick(RendezvousClock::time_point now, Outbox& out) {
  if (!live()) return;
  for (const ParkedRead& p : key_values_.takeExpired(now)) {
    std::vector<std::string> missing = key_values_.missing(p.keys);
    std::string what = p.wants_value ? "key " + quoted(p.keys.front()) + " (no rank has set it)"
                                     : "keys " + keyList(missing) + " (" + std::to_string(missing.size()) +
                                           " of " + std::to_string(p.keys.size()) + " not set)";
    out.refuse(p.identity, p.request_id,
               "timed out after " + secondsText(p.timeout) + " waiting for " + what);
  }
  for (const StrandedArrival& s : barriers_.takeExpired(now, worldSize()))
    out.refuse(s.arrival.identity, s.arrival.request_id,
               "barrier " + quoted(s.name) + " timed out after " + secondsText(s.arrival.timeout) + ": " +
                   std::to_string(s.missing.size()) + " of " + std::to_string(worldSize()) +
                   " ranks have not arrived: " + describeRanks(s.missing));
  for (size_t r = 0; r < last_seen_.size(); ++r) {
    if (left_[r] || now - last_seen_[r] <= heartbeat_timeout_) continue;
    lose(static_cast<int>(r), "no heartbeat for " + secondsText(heartbeat_timeout_), out);
    if (!live()) return;
  }
}

void RendezvousGroup::lose(int rank, const std::string& why, Outbox& out) {
  if (!live() || rank < 0 || rank >= worldSize() || left_[static_cast<size_t>(rank)]) return;
  if (elastic_) {
    for (const auto& [r, w] : regroup_losses_)
      if (r == rank) return;
    regroup_losses_.emplace_back(rank, why);
    return;
  }
  if (survivable_[static_cast<size_t>(rank)] && lostCount() < max_survivable_losses_)
    return dropLost(rank, why, out);
  std::string reason = "lost " + describeRank(rank) + ": " + why;
  if (survivable_[static_cast<size_t>(rank)])
    reason += " (the run has lost " + std::to_string(lostCount()) +
              " already, as many as [strategy] min_workers allows)";
  // The lost rank is told too: if it was only cut off for a while, it learns it was dropped.
  abort(reason, -1, out);
}

void RendezvousGroup::endForRegroup(const std::string& reason, Outbox& out) {
  if (!live()) return;
  end_reason_ = "the group of generation " + std::to_string(generation_) + " is over: " + reason;
  wire::RegroupNotice notice;
  notice.generation = generation_;
  notice.reason = reason;
  for (size_t r = 0; r < identities_.size(); ++r)
    if (!left_[r]) out.send(identities_[r], 0, notice);
  for (const ParkedRead& p : key_values_.takeAll()) out.refuse(p.identity, p.request_id, end_reason_);
  for (const StrandedArrival& s : barriers_.takeAll(worldSize()))
    out.refuse(s.arrival.identity, s.arrival.request_id, end_reason_);
}

void RendezvousGroup::setKey(const std::string& key, const Bytes& value, Outbox& out) {
  key_values_.set(key, value);
  answerParkedReads(out);
}

void RendezvousGroup::dropLost(int rank, const std::string& why, Outbox& out) {
  const std::string who = describeRank(rank);
  left_[static_cast<size_t>(rank)] = true;
  ++left_count_;
  lost_.push_back(rank);
  lost_ranks_ += std::to_string(rank) + " " + peers_[static_cast<size_t>(rank)].host + "\n";
  key_values_.set(kLostRanksKey, Bytes(lost_ranks_.begin(), lost_ranks_.end()));
  log("lost " + who + ": " + why + "; the run goes on without it (" +
      std::to_string(worldSize() - left_count_) + " of " + std::to_string(worldSize()) + " ranks remain)");
  // If it was only frozen or cut off for a while, it learns it was dropped.
  wire::AbortNotice notice;
  notice.origin_rank = -1;
  notice.reason = "this rank was lost (" + why + ") and dropped from the run, which goes on without it";
  out.send(identities_[static_cast<size_t>(rank)], 0, notice);
  for (const StrandedArrival& s : barriers_.takeWaitingFor(rank, worldSize()))
    out.refuse(s.arrival.identity, s.arrival.request_id,
               "barrier " + quoted(s.name) + " cannot complete: " + who + " was lost before reaching it");
  answerParkedReads(out);
  if (allLeft()) end_reason_ = "the run of generation " + std::to_string(generation_) + " has ended";
}

}  // namespace dtrain
