// NcclProcessGroup: the collectives over NCCL, one GPU per rank.
//
// Construction is collective: every rank constructs one with the same store,
// key prefix, size and timeout. Rank 0 creates NCCL's unique id and publishes
// it in the store under "<key_prefix>/nccl_unique_id"; the others read it
// (waiting up to the timeout). The communicator is created non-blocking and
// polled, so a rank that never comes makes the constructor throw CommError
// after the timeout (the half-made communicator aborted) instead of hanging.
//
// Buffers: device memory (of this group's device, or managed memory) is used
// in place. Host memory is copied through a device buffer of the group's,
// grown as needed, on the group's stream: correct, but a copy each way; pass
// device memory where speed matters.
//
// Ordering: each call first makes the group's own stream wait (an event) for
// the work queued on `compute_stream` so far, then runs there, and returns
// when the result is in place: the calling thread polls the call's completion
// event and NCCL's asynchronous error every 100 us, backing off to 1 ms.
// compute_stream is not made to wait: kernels queued on it after the call
// returns see the result, and those queued while the call runs on another
// thread (backward, while a communication thread reduces a gradient bucket)
// go on meanwhile.
//
// Point to point (ncclSend / ncclRecv; NCCL has no tags: between two ranks
// messages match in the order they were sent): a send is queued on the
// group's stream and returns; its host memory is copied to a device buffer
// of its own first, kept until waitSends(). A receive returns when the
// message is in place, and waits for the sends queued before it on the
// stream too, so a pipeline gives each direction between two stages a group
// of its own (a send and a receive crossing on one stream would wait for
// each other).
//
// reduceScatterSum with equal counts is NCCL's in-place reduce-scatter; with
// uneven counts it is an all-reduce of the whole buffer (every segment
// summed, twice the traffic: simple and correct). barrier is an all-reduce
// of one value.
//
// Failures: an asynchronous NCCL error, or a call still running at its
// deadline (the timeout after it began), aborts the communicator and throws
// CommError naming this rank (NCCL does not say which peer failed). The group
// is unusable from then on: later calls throw at once.
//
// Destruction: an orderly close (ncclCommFinalize, waiting up to the timeout
// for the peers, then ncclCommDestroy); ncclCommAbort after a failure or
// during exception unwinding, so peers are not kept waiting. Never throws.
//
// Threading: one thread at a time per group, any thread: the constructor and
// each call make the group's device current on the calling thread.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <string>

#include "core/comm/process_group.h"
#include "core/comm/store.h"

namespace dtrain {

class NcclProcessGroup : public ProcessGroup {
 public:
  // Collective over `size` ranks, one GPU each (`device` = this rank's CUDA
  // device). `compute_stream`: the stream the caller's kernels run on (a
  // stream of `device`; nullptr for the default stream).
  // `store` is used only while constructing. Throws CommError (DeviceError
  // for a device that does not exist).
  NcclProcessGroup(Store& store, const std::string& key_prefix, int rank, int size, int device,
                   cudaStream_t compute_stream, std::chrono::milliseconds timeout);
  ~NcclProcessGroup() override;
  NcclProcessGroup(const NcclProcessGroup&) = delete;
  NcclProcessGroup& operator=(const NcclProcessGroup&) = delete;

  int rank() const override;
  int size() const override;
  std::string describe() const override;  // "nccl (device 0)"

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
  bool deviceNative() const override { return true; }
  // The call under way stops at its next poll and aborts the communicator
  // (ncclCommAbort); later calls throw; the destructor aborts too.
  void abandon() override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain
