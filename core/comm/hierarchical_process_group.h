// HierarchicalProcessGroup: the all-reduce of ranks spread over several
// hosts, in three steps (TensorFlow's HierarchicalCopyAllReduce, Horovod's
// hierarchical mode, NCCL's intra-node rings):
//   1. inside each host, the host's ranks sum their data over shared memory
//      (ShmProcessGroup, in rank order);
//   2. one leader per host (its first rank) all-reduces the host sums with
//      the other leaders over Gloo;
//   3. each leader hands the result to its host's ranks over shared memory.
// Only one rank per host sends over the network: each host sends 2(H-1)/H
// of the message for H hosts, where a flat ring over N ranks passes every
// rank's share through TCP (2(N-1)/N per rank, and per host as much again on
// the link that leaves it); for 2 hosts of 2 ranks, 1 message's worth per
// host instead of 1.5, and TCP work in 2 processes instead of 4.
//
// The sum is the same on every rank, bitwise. Its order: inside a host in
// rank order, then across hosts in the order of the Gloo algorithm, so where
// the data's sums are exact (integers, say) it equals the flat all-reduce's.
//
// Broadcast, all-gather, reduce-scatter, the barrier and point-to-point
// messages go over a flat Gloo group of every rank, as without the hierarchy.
//
// Ranks must be numbered host by host (every rank of a host contiguous), as
// the rendezvous numbers them. Construction is collective; a failure in any
// step throws CommError naming the step, the host and the global ranks.
// One thread at a time, like the groups it is made of.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/comm/store.h"
#include "core/errors.h"

namespace dtrain {

struct HierarchyOptions {
  std::vector<int> node_of_rank;             // the host (node) of every rank
  std::vector<std::string> rank_hosts;       // for messages, by rank (as GlooOptions's); may be empty
  std::string address = "127.0.0.1";         // where this rank's Gloo devices listen
  std::string algorithm = "auto";            // the leaders' (and the flat group's) Gloo all-reduce
  std::chrono::milliseconds timeout{30000};  // of joining and of every call
  std::string prefix = "hierarchical";       // the groups' namespace in the store
  int64_t shm_slot_bytes = 4 << 20;          // the host groups' chunk (ShmOptions::slot_bytes)
};

class HierarchicalProcessGroup : public ProcessGroup {
 public:
  HierarchicalProcessGroup(Store& store, int rank, HierarchyOptions options);
  ~HierarchicalProcessGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(options_.node_of_rank.size()); }
  // "hierarchical (shared memory inside 2 hosts, gloo ring between their leaders)".
  std::string describe() const override;

  void allReduceSum(float* data, int64_t n) override;
  void allReduceSum(double* data, int64_t n) override;
  void broadcast(float* data, int64_t n, int root) override;
  void broadcastBytes(uint8_t* data, int64_t n, int root) override;
  void allGather(const float* in, int64_t n, float* out) override;
  void reduceScatterSum(float* data, const std::vector<int64_t>& counts) override;
  void barrier() override;
  void sendAsync(const void* data, int64_t bytes, int to, uint32_t tag) override;
  void recv(void* data, int64_t bytes, int from, uint32_t tag) override;
  void waitSends() override;
  void abandon() override;

 private:
  template <typename T>
  void hierarchicalAllReduce(T* data, int64_t n);
  // What a failure of an all-reduce of n values says, built only when one happens.
  CommError failedInsideHost(int64_t n, const CommError& e) const;
  CommError failedBetweenLeaders(int64_t n, const CommError& e) const;
  std::string hostOf(int rank) const;  // " on HOST", or "" when not known

  const int rank_;
  const HierarchyOptions options_;
  int node_ = 0;
  std::vector<int> leaders_;                     // the global rank of each host's leader, by leader index
  std::shared_ptr<ProcessGroup> local_;          // this host's ranks; null when it has one
  std::shared_ptr<ProcessGroup> leaders_group_;  // the hosts' leaders; null off a leader or on one host
  std::shared_ptr<ProcessGroup> flat_;           // every rank
};

}  // namespace dtrain
