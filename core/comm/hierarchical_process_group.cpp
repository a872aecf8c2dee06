#include "core/comm/hierarchical_process_group.h"

#include <algorithm>

#include "core/comm/gloo_process_group.h"
#include "core/comm/shm_process_group.h"
#include "core/errors.h"

namespace dtrain {

namespace {

std::string rangeText(int first, int last) {
  return first == last ? "rank " + std::to_string(first)
                       : "ranks " + std::to_string(first) + "-" + std::to_string(last);
}

}  // namespace

HierarchicalProcessGroup::HierarchicalProcessGroup(Store& store, int rank, HierarchyOptions options)
    : rank_(rank), options_(std::move(options)) {
  const std::vector<int>& node_of = options_.node_of_rank;
  const int world = static_cast<int>(node_of.size());
  if (rank < 0 || rank >= world)
    throw CommError("hierarchical group: rank " + std::to_string(rank) + " of " + std::to_string(world));
  if (!options_.rank_hosts.empty() && options_.rank_hosts.size() != node_of.size())
    throw CommError("hierarchical group: " + std::to_string(options_.rank_hosts.size()) +
                    " hosts named for " + std::to_string(world) + " ranks");
  for (int r = 1; r < world; ++r)
    if (node_of[static_cast<size_t>(r)] != node_of[static_cast<size_t>(r) - 1] &&
        std::find(node_of.begin(), node_of.begin() + r, node_of[static_cast<size_t>(r)]) !=
            node_of.begin() + r)
      throw CommError("hierarchical group: rank " + std::to_string(r) + " is on node " +
                      std::to_string(node_of[static_cast<size_t>(r)]) +
                      " but not next to that node's other ranks; ranks must be numbered host by host");
  node_ = node_of[static_cast<size_t>(rank)];
  int local_rank = 0, local_size = 0, leader_index = -1;
  for (int r = 0; r < world; ++r) {
    if (r == 0 || node_of[static_cast<size_t>(r)] != node_of[static_cast<size_t>(r) - 1]) {
      if (r == rank) leader_index = static_cast<int>(leaders_.size());
      leaders_.push_back(r);
    }
    if (node_of[static_cast<size_t>(r)] == node_) {
      if (r < rank) ++local_rank;
      ++local_size;
    }
  }
  // Collective in this order on every rank: the host's group (its ranks),
  // the leaders' (the leaders), then everyone's.
  if (local_size > 1) {
    ShmOptions s;
    s.timeout = options_.timeout;
    s.prefix = options_.prefix + "/host/" + std::to_string(node_);
    s.slot_bytes = options_.shm_slot_bytes;
    local_ = std::make_shared<ShmProcessGroup>(store, local_rank, local_size, s);
  }
  GlooOptions g;
  g.algorithm = options_.algorithm;
  g.address = options_.address;
  g.timeout = options_.timeout;
  if (leader_index >= 0 && leaders_.size() > 1) {
    g.prefix = options_.prefix + "/leaders";
    if (!options_.rank_hosts.empty())
      for (int leader : leaders_) g.rank_hosts.push_back(options_.rank_hosts[static_cast<size_t>(leader)]);
    leaders_group_ =
        std::make_shared<GlooProcessGroup>(store, leader_index, static_cast<int>(leaders_.size()), g);
  }
  g.prefix = options_.prefix + "/flat";
  g.rank_hosts = options_.rank_hosts;
  flat_ = std::make_shared<GlooProcessGroup>(store, rank, world, g);
}

HierarchicalProcessGroup::~HierarchicalProcessGroup() = default;

std::string HierarchicalProcessGroup::describe() const {
  return "hierarchical (shared memory inside each of " + std::to_string(leaders_.size()) + " hosts, gloo (" +
         options_.algorithm + ") between their leaders)";
}

std::string HierarchicalProcessGroup::hostOf(int rank) const {
  return static_cast<size_t>(rank) < options_.rank_hosts.size()
             ? " on " + options_.rank_hosts[static_cast<size_t>(rank)]
             : std::string();
}

CommError HierarchicalProcessGroup::failedInsideHost(int64_t n, const CommError& e) const {
  const std::vector<int>& node_of = options_.node_of_rank;
  const int first = static_cast<int>(std::find(node_of.begin(), node_of.end(), node_) - node_of.begin());
  const int last = static_cast<int>(node_of.rend() - std::find(node_of.rbegin(), node_of.rend(), node_)) - 1;
  return CommError("hierarchical all-reduce of " + std::to_string(n) + " values, inside node " +
                   std::to_string(node_) + " (" + rangeText(first, last) + hostOf(first) +
                   ", there numbered from 0): " + e.what());
}

CommError HierarchicalProcessGroup::failedBetweenLeaders(int64_t n, const CommError& e) const {
  std::string who;
  for (size_t i = 0; i < leaders_.size(); ++i)
    who += (i ? ", " : "") + std::to_string(i) + " = rank " + std::to_string(leaders_[i]) + " (node " +
           std::to_string(options_.node_of_rank[static_cast<size_t>(leaders_[i])]) + hostOf(leaders_[i]) +
           ")";
  return CommError("hierarchical all-reduce of " + std::to_string(n) +
                   " values, between the hosts' leaders (there numbered " + who + "): " + e.what());
}

template <typename T>
void HierarchicalProcessGroup::hierarchicalAllReduce(T* data, int64_t n) {
  try {
    if (local_) local_->allReduceSum(data, n);
  } catch (const CommError& e) {
    throw failedInsideHost(n, e);
  }
  try {
    if (leaders_group_) leaders_group_->allReduceSum(data, n);
  } catch (const CommError& e) {
    throw failedBetweenLeaders(n, e);
  }
  try {
    if (local_)
      local_->broadcastBytes(reinterpret_cast<uint8_t*>(data), n * static_cast<int64_t>(sizeof(T)), 0);
  } catch (const CommError& e) {
    throw failedInsideHost(n, e);
  }
}

void HierarchicalProcessGroup::allReduceSum(float* data, int64_t n) { hierarchicalAllReduce(data, n); }
void HierarchicalProcessGroup::allReduceSum(double* data, int64_t n) { hierarchicalAllReduce(data, n); }
void HierarchicalProcessGroup::broadcast(float* data, int64_t n, int root) {
  flat_->broadcast(data, n, root);
}
void HierarchicalProcessGroup::broadcastBytes(uint8_t* data, int64_t n, int root) {
  flat_->broadcastBytes(data, n, root);
}
void HierarchicalProcessGroup::allGather(const float* in, int64_t n, float* out) {
  flat_->allGather(in, n, out);
}
void HierarchicalProcessGroup::reduceScatterSum(float* data, const std::vector<int64_t>& counts) {
  flat_->reduceScatterSum(data, counts);
}
void HierarchicalProcessGroup::barrier() { flat_->barrier(); }
void HierarchicalProcessGroup::sendAsync(const void* data, int64_t bytes, int to, uint32_t tag) {
  flat_->sendAsync(data, bytes, to, tag);
}
void HierarchicalProcessGroup::recv(void* data, int64_t bytes, int from, uint32_t tag) {
  flat_->recv(data, bytes, from, tag);
}
void HierarchicalProcessGroup::waitSends() { flat_->waitSends(); }

void HierarchicalProcessGroup::abandon() {
  for (ProcessGroup* g : {local_.get(), leaders_group_.get(), flat_.get()})
    if (g) g->abandon();
}

}  // namespace dtrain
