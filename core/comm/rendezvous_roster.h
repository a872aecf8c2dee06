// RendezvousRoster: the job's expected layout (nodes with their slots) and
// the workers that have joined it so far. Rank = the slots of earlier nodes
// plus the worker's slot, so ranks follow the node list whatever order the
// workers arrive in.
// Ownership: plain state of the coordinator; not thread-safe.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/comm/rendezvous_types.h"

namespace dtrain {

// A worker that has joined, with where to send its answer.
struct Joiner {
  std::string identity;  // the worker's ZeroMQ routing id
  uint64_t request_id = 0;
  JoinRequest request;
};

class RendezvousRoster {
 public:
  // Throws CommError for an empty layout or a node without slots.
  explicit RendezvousRoster(std::vector<NodeLayout> nodes);

  int worldSize() const { return world_size_; }
  int nodeCount() const { return static_cast<int>(nodes_.size()); }

  // Why this (node, slot) cannot join now: out of range or taken. nullopt when it can.
  std::optional<std::string> refusal(const JoinRequest& request) const;
  // Records the joiner; refusal() must have returned nullopt.
  void add(Joiner joiner);
  // The rank of the joiner with this routing id, or -1.
  int rankOfIdentity(const std::string& identity) const;

  int joinedCount() const { return joined_count_; }
  bool complete() const { return joined_count_ == world_size_; }
  // "2 of 4 workers: node 1 (10.0.0.2) slots 0, 1"
  std::string describeMissing() const;

  // Joiners by rank; complete() must hold.
  const std::vector<std::optional<Joiner>>& joiners() const { return by_rank_; }
  // The peer table of the formed group; complete() must hold.
  std::vector<PeerInfo> peers() const;

  // Forgets every joiner (the layout stays).
  void clear();

 private:
  int rankOf(int node, int slot) const { return first_rank_[static_cast<size_t>(node)] + slot; }

  std::vector<NodeLayout> nodes_;
  std::vector<int> first_rank_;  // per node
  int world_size_ = 0;
  std::vector<std::optional<Joiner>> by_rank_;
  int joined_count_ = 0;
  std::unordered_map<std::string, int> rank_of_identity_;
};

}  // namespace dtrain
