// GlooProcessGroup: the collectives over Gloo's TCP transport, for CPU buffers.
//
// Construction is collective: every rank of the group constructs one with the
// same store, size and options. Each rank binds a TCP device to
// options.address, the ranks meet in the store under options.prefix, and a
// full mesh of connections is made. A rank that does not join within
// options.timeout makes the others' constructors throw CommError naming it.
//
// All-reduce runs Gloo's algorithm objects (ring, ring_chunked,
// halving_doubling, bcube), kept between calls so that a training loop
// reducing the same buckets every step does not rebuild them. Reduce-scatter
// with equal counts is Gloo's halving-doubling one, kept the same way; with
// uneven counts it is an all-reduce of the whole buffer (Gloo's own is wrong
// for some uneven splits). Broadcast and all-gather are Gloo's per-call
// collectives; barrier is Gloo's all-to-all one, built once.
//
// Memory: the cache holds each kept algorithm's scratch (one to two times its
// message, plus a copy for messages under 1 MiB); it keeps at most 32 small
// ones, and large ones covering at most 1 GiB of messages, dropping the least
// recently used.
//
// Failures: a peer that is gone or does not take part in time makes the call
// throw CommError naming the operation and, where it can be known, the peer
// rank. Gloo closes the connections after such an error, so the group is
// unusable from then on: later calls throw at once.
//
// Destruction: an orderly one first waits (up to the timeout) for the other
// ranks to destroy theirs, so no peer loses the last messages of the last
// call; one during exception unwinding closes at once, so the peers fail fast.
//
// Threading: one thread at a time per group. The TCP device runs its own
// event thread.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/comm/store.h"

namespace dtrain {

struct GlooOptions {
  // The all-reduce algorithm: "auto" (chosen per call from the message size),
  // "ring", "ring_chunked", "halving_doubling" or "bcube".
  std::string algorithm = "auto";
  // The local address the TCP device binds and peers connect to: the host's
  // own address in a multi-host run.
  std::string address = "127.0.0.1";
  // Deadline of connecting and of every wait inside a call.
  std::chrono::milliseconds timeout{30000};
  // This group's namespace in the store: one per group and run (a second
  // group under the same prefix in the same store is refused).
  std::string prefix = "gloo";
  // The host of each rank, for messages ("connection to rank 2 (host b)
  // closed"); empty: ranks alone.
  std::vector<std::string> rank_hosts;
};

class GlooProcessGroup : public ProcessGroup {
 public:
  // Blocks until all `size` ranks have connected; throws CommError otherwise.
  // `store` is used only while constructing.
  GlooProcessGroup(Store& store, int rank, int size, GlooOptions options = {});
  ~GlooProcessGroup() override;
  GlooProcessGroup(const GlooProcessGroup&) = delete;
  GlooProcessGroup& operator=(const GlooProcessGroup&) = delete;

  int rank() const override;
  int size() const override;
  std::string describe() const override;

  void allReduceSum(float* data, int64_t n) override;
  void allReduceSum(double* data, int64_t n) override;
  void broadcast(float* data, int64_t n, int root) override;
  void broadcastBytes(uint8_t* data, int64_t n, int root) override;
  void allGather(const float* in, int64_t n, float* out) override;
  void reduceScatterSum(float* data, const std::vector<int64_t>& counts) override;
  void barrier() override;
  void abandon() override;
  void sendAsync(const void* data, int64_t bytes, int to, uint32_t tag) override;
  void recv(void* data, int64_t bytes, int from, uint32_t tag) override;
  void waitSends() override;

  // The all-reduce algorithm `option` (a GlooOptions::algorithm value) runs
  // for `bytes` bytes on `size` ranks, e.g. "ring" for a small message under "auto".
  static std::string allReduceAlgorithmFor(const std::string& option, int size, int64_t bytes);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain
