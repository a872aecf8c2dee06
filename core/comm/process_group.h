// The collectives the strategies use, over the ranks of one run. Gloo (CPU
// buffers, TCP) and a single-process group implement it today; NCCL (one GPU
// per rank) will implement the same interface.
//
// Every call is collective: all ranks make the same calls in the same order
// with the same counts. Every call has a deadline (the group's timeout); a
// peer that does not take part in time, or whose connection breaks, makes
// the call throw CommError naming the peer where it is known.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "gloo (ring)", "single process": for logs.
  virtual std::string describe() const = 0;

  // In place: data becomes the element-wise sum over all ranks.
  virtual void allReduceSum(float* data, int64_t n) = 0;
  virtual void allReduceSum(double* data, int64_t n) = 0;
  // In place: every rank gets root's data.
  virtual void broadcast(float* data, int64_t n, int root) = 0;
  virtual void broadcastBytes(uint8_t* data, int64_t n, int root) = 0;
  // out[r * n .. (r + 1) * n) = rank r's in[0 .. n), on every rank.
  virtual void allGather(const float* in, int64_t n, float* out) = 0;
  // Sums data (the same length, sum(counts), on every rank) over the ranks;
  // rank r's segment [offset_r, offset_r + counts[r]) of data then holds the
  // sum of that segment. Other segments of data are left unspecified.
  virtual void reduceScatterSum(float* data, const std::vector<int64_t>& counts) = 0;
  // The reverse, in place: data holds sum(counts) floats; rank r's segment
  // [offset_r, offset_r + counts[r]) of its data goes to every rank's
  // (a sharded run's updated shards). The default broadcasts each segment
  // from its owner.
  virtual void allGatherInPlace(float* data, const std::vector<int64_t>& counts);
  virtual void barrier() = 0;

  // Point to point (a pipeline's stage-to-stage messages). Not collective:
  // only the two ranks take part. Between two ranks, the messages of one tag
  // arrive in the order they were sent.
  // Starts sending `bytes` bytes to rank `to` and returns; `data` must stay
  // untouched until waitSends() has returned.
  virtual void sendAsync(const void* data, int64_t bytes, int to, uint32_t tag);
  // Receives the next message of `tag` from rank `from`, which must be
  // `bytes` bytes long, within the group's deadline.
  virtual void recv(void* data, int64_t bytes, int from, uint32_t tag);
  // Waits until every send started has been handed over.
  virtual void waitSends();

  // Whether the group moves device memory itself, without a copy through
  // host memory (NCCL): a pipeline's GPU stages then message each other
  // over groups of its kind.
  virtual bool deviceNative() const { return false; }

  // The run is re-forming its group (an elastic run lost a rank): callable
  // from any thread, never throws. A call waiting on shared memory throws at
  // its next check; every later call throws at once; the destructor then
  // waits for no peer. A wait inside Gloo cannot be woken: it ends at its
  // deadline, or when a peer's closed connection fails it.
  virtual void abandon() {}
};

}  // namespace dtrain
