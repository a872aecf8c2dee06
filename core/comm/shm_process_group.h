// ShmProcessGroup: the collectives for ranks that share one host, through a
// POSIX shared-memory segment instead of TCP loopback (as NCCL's and
// Horovod's intra-node paths do). A rank copies its data into shared memory
// once and the result out once, with no system call on the way: 2 MB between
// two local processes takes about 0.4 ms, where Gloo over loopback takes ~4.
//
// Construction is collective (core/comm/shm_join.h): rank 0 creates the
// segment under a fresh name ("/dtrain-<pid>-<random hex>") and publishes the
// name in the store under "<prefix>/segment"; the others map it; each rank
// records its pid and arrives at phase 1; once all have, the name is
// removed, so nothing stays in /dev/shm even if the run is killed later. A
// rank that does not join within options.timeout makes the others throw
// CommError naming it; a segment that cannot be made (a /dev/shm too small
// or missing) makes rank 0 throw naming the segment and the reason, and the
// others throw at once.
//
// Phases. Each rank has a counter of the phases it has arrived at; a phase
// is: bump one's own counter (release), then wait until every counter has
// reached it (acquire), so what a rank wrote before arriving is what the
// others read after. Between two phases (an interval) the ranks can only be
// in the same interval: none passes the next phase before all arrive at it.
// Hence the one rule every collective keeps: within an interval each shared
// area is either only read or only written (a slot by its rank, the result
// area in per-rank parts). All-reduce, per chunk of at most slot_bytes:
//   A  copy the chunk into one's slot                         | phase
//   B  sum one's 1/size part over all slots, in rank order,   |
//      into that part of the result area                      | phase
//   C  copy the whole result chunk back into one's data, and go on with
//      the next chunk's A in the same interval.
// Slots are read only in B and written only in A/C intervals; the result is
// written only in B and read only in C intervals; so a rank racing ahead into
// the next chunk (or call) never overwrites what a slower one still reads.
// Across calls: every collective starts in an interval in which it writes
// only its own slot, and ends in one in which it reads only the result area
// (broadcast and all-gather, which read slots, end with one more phase), so
// any call may follow any other. Summing in rank order makes the result
// bitwise the same on every rank, and deterministic for a fixed size.
// Broadcast: per chunk, the root copies into its slot | phase | the others
// copy out | phase. All-gather: per chunk, each rank copies its part into its
// slot | phase | every rank copies all slots out | phase. Reduce-scatter is
// the all-reduce of the whole buffer (its contract needs only each rank's own
// segment). Barrier is one phase. Calls with nothing to move return at once
// on every rank.
//
// Failures: a waiting rank checks every few milliseconds whether the ranks it
// waits for can still come: a peer whose process has exited makes the call
// throw at once ("shm group (rank 0 of 2): all-reduce of 1001 floats: rank 1
// (pid 12345) has exited"), as does one that left the group (its own call
// failed, or it destroyed its group). A peer that is alive but does not take
// part makes it throw after options.timeout ("... rank 1 did not take part
// within 1 s"). After a failure the group is unusable: later calls throw at
// once, and the peers waiting for this rank stop waiting at once.
//
// Threading: one thread at a time per group. Nothing runs in the background.
//
// Memory: (size + 1) * slot_bytes + a header of a few KiB, in /dev/shm, the
// same segment mapped by every rank (36 MiB for 8 ranks at the default 4 MiB);
// reserved up front. A group of 1 makes no segment.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/comm/process_group.h"
#include "core/comm/store.h"

namespace dtrain {

class ShmLayout;
class ShmSegment;

struct ShmOptions {
  // Deadline of joining and of every wait inside a call.
  std::chrono::milliseconds timeout{30000};
  // This group's namespace in the store: one per group and run (a second
  // group under the same prefix in the same store is refused).
  std::string prefix = "shm";
  // Bytes of each rank's slot and of the result area: the most one phase
  // moves. A positive multiple of 64, at most 1 TiB.
  int64_t slot_bytes = 4 << 20;
};

class ShmProcessGroup : public ProcessGroup {
 public:
  // Blocks until all `size` ranks have joined; throws CommError otherwise.
  // `store` is used only while constructing.
  ShmProcessGroup(Store& store, int rank, int size, ShmOptions options = {});
  // Unmaps the segment and tells the peers this rank is gone. Never throws.
  ~ShmProcessGroup() override;
  ShmProcessGroup(const ShmProcessGroup&) = delete;
  ShmProcessGroup& operator=(const ShmProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // "shared memory (2 ranks on this host)".
  std::string describe() const override;

  void allReduceSum(float* data, int64_t n) override;
  void allReduceSum(double* data, int64_t n) override;
  void broadcast(float* data, int64_t n, int root) override;
  void broadcastBytes(uint8_t* data, int64_t n, int root) override;
  void allGather(const float* in, int64_t n, float* out) override;
  void reduceScatterSum(float* data, const std::vector<int64_t>& counts) override;
  void allGatherInPlace(float* data, const std::vector<int64_t>& counts) override;
  void barrier() override;
  void abandon() override;

 private:
  // The all-reduce of data[0, n), of which this rank reads back only
  // [keep_begin, keep_end) (all of it for an all-reduce; its own segment
  // for a reduce-scatter: the same sums, bit for bit).
  template <typename T>
  void allReduceChunks(T* data, int64_t n, int64_t keep_begin = 0, int64_t keep_end = INT64_MAX);
  void broadcastChunks(uint8_t* data, int64_t bytes, int root);
  void allGatherChunks(const float* in, int64_t n, float* out);
  // Arrives at the next phase and waits for every rank to.
  void phase();
  // Runs `body` as the collective `operation`; a failure leaves the group
  // unusable and tells the peers.
  template <typename Body>
  void collective(const std::string& operation, Body&& body);

  const int rank_;
  const int size_;
  const ShmOptions options_;
  const std::string who_;  // "shm group (rank 0 of 2)"
  std::unique_ptr<ShmSegment> segment_;
  std::unique_ptr<ShmLayout> layout_;  // over segment_; null for a group of 1
  uint64_t arrivals_ = 1;              // phases this rank has arrived at (joining is 1)
  std::string failure_;                // the first failure; set = unusable
  std::atomic<bool> abandoned_{false};
};

}  // namespace dtrain
