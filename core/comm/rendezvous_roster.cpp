#include "core/comm/rendezvous_roster.h"

#include <utility>

#include "core/errors.h"

namespace dtrain {

namespace {

std::string describeNode(int index, const NodeLayout& node) {
  return "node " + std::to_string(index) + " (" + node.address + ")";
}

}  // namespace

RendezvousRoster::RendezvousRoster(std::vector<NodeLayout> nodes) : nodes_(std::move(nodes)) {
  if (nodes_.empty()) throw CommError("the rendezvous needs at least one node in the job's layout");
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].slots <= 0)
      throw CommError(describeNode(static_cast<int>(i), nodes_[i]) + " has " +
                      std::to_string(nodes_[i].slots) + " worker slots; every node needs at least one");
    first_rank_.push_back(world_size_);
    world_size_ += nodes_[i].slots;
  }
  by_rank_.resize(static_cast<size_t>(world_size_));
}

std::optional<std::string> RendezvousRoster::refusal(const JoinRequest& r) const {
  if (r.node < 0 || r.node >= nodeCount())
    return "node index " + std::to_string(r.node) + " is out of range: the job has " +
           std::to_string(nodeCount()) + " node(s), 0.." + std::to_string(nodeCount() - 1);
  const NodeLayout& node = nodes_[static_cast<size_t>(r.node)];
  if (r.slot < 0 || r.slot >= node.slots)
    return "slot " + std::to_string(r.slot) + " is out of range for " + describeNode(r.node, node) +
           ", which has " + std::to_string(node.slots) + " slot(s), 0.." + std::to_string(node.slots - 1);
  int rank = rankOf(r.node, r.slot);
  if (const auto& taken = by_rank_[static_cast<size_t>(rank)])
    return "rank " + std::to_string(rank) + " (node " + std::to_string(r.node) + ", slot " +
           std::to_string(r.slot) + ") has already joined from host " + taken->request.host + " pid " +
           std::to_string(taken->request.pid);
  return std::nullopt;
}

void RendezvousRoster::add(Joiner joiner) {
  int rank = rankOf(joiner.request.node, joiner.request.slot);
  rank_of_identity_[joiner.identity] = rank;
  by_rank_[static_cast<size_t>(rank)] = std::move(joiner);
  ++joined_count_;
}

int RendezvousRoster::rankOfIdentity(const std::string& identity) const {
  auto it = rank_of_identity_.find(identity);
  return it == rank_of_identity_.end() ? -1 : it->second;
}

std::string RendezvousRoster::describeMissing() const {
  std::string nodes_text;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    std::vector<int> slots;
    for (int s = 0; s < nodes_[n].slots; ++s)
      if (!by_rank_[static_cast<size_t>(rankOf(static_cast<int>(n), s))]) slots.push_back(s);
    if (slots.empty()) continue;
    if (!nodes_text.empty()) nodes_text += "; ";
    nodes_text += describeNode(static_cast<int>(n), nodes_[n]) + (slots.size() == 1 ? " slot " : " slots ");
    for (size_t i = 0; i < slots.size(); ++i) nodes_text += (i ? ", " : "") + std::to_string(slots[i]);
  }
  return std::to_string(world_size_ - joined_count_) + " of " + std::to_string(world_size_) +
         " workers: " + nodes_text;
}

std::vector<PeerInfo> RendezvousRoster::peers() const {
  std::vector<PeerInfo> out;
  out.reserve(by_rank_.size());
  for (const auto& j : by_rank_) {
    PeerInfo p;
    if (j) {
      p.host = j->request.host;
      p.node = j->request.node;
      p.slot = j->request.slot;
      p.pid = j->request.pid;
      p.local_devices = j->request.local_devices;
    }
    out.push_back(std::move(p));
  }
  return out;
}

void RendezvousRoster::clear() {
  for (auto& j : by_rank_) j.reset();
  joined_count_ = 0;
  rank_of_identity_.clear();
}

}  // namespace dtrain
