// HostStagedGroup: a host-memory process group (Gloo, shared memory) for
// tensors on a GPU. Device buffers are copied into pinned host memory (after
// the work queued on `compute_stream` so far), handed to the host group, and
// the result is copied back before the call returns; host buffers pass
// straight through. It lets several ranks share one GPU, which NCCL refuses.
//
// Copies run on a stream of the group's own, ordered after the compute
// stream by an event; compute_stream itself is not made to wait, since the
// result is in place when a call returns. The pinned staging memory grows to
// the largest call seen and is freed with the group.
//
// Deadlines and failures are the host group's: its CommError passes through
// unchanged (a failed CUDA copy is a DeviceError). Collective, blocking and
// one thread at a time, like the host group; each call makes the group's
// device current on the calling thread.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "core/backend/cuda/cuda_handles.h"
#include "core/backend/cuda/staging_buffers.h"
#include "core/comm/process_group.h"

namespace dtrain {

class HostStagedGroup : public ProcessGroup {
 public:
  // `device`: the GPU this rank's tensors live on (made current on the
  // calling thread); `compute_stream`: the stream its kernels run on (a
  // stream of `device`; nullptr for the default stream).
  HostStagedGroup(std::shared_ptr<ProcessGroup> host_group, int device, cudaStream_t compute_stream);
  HostStagedGroup(const HostStagedGroup&) = delete;
  HostStagedGroup& operator=(const HostStagedGroup&) = delete;

  int rank() const override;
  int size() const override;
  // "gloo (auto), staged through host memory"
  std::string describe() const override;

  void allReduceSum(float* data, int64_t n) override;
  void allReduceSum(double* data, int64_t n) override;
  void broadcast(float* data, int64_t n, int root) override;
  void broadcastBytes(uint8_t* data, int64_t n, int root) override;
  void allGather(const float* in, int64_t n, float* out) override;
  void reduceScatterSum(float* data, const std::vector<int64_t>& counts) override;
  void barrier() override;
  void abandon() override { host_->abandon(); }

 private:
  template <typename T>
  void allReduceStaged(T* data, int64_t n);
  template <typename T>
  void broadcastStaged(T* data, int64_t n, int root, void (ProcessGroup::*hostBroadcast)(T*, int64_t, int));
  // Makes the group's device current; whether `data` is memory on a device.
  bool onDevice(const void* data);
  // The copy stream waits for the compute stream's queued work.
  void beginStaging();
  // Queues a copy on the copy stream (either direction).
  void copy(void* to, const void* from, size_t bytes);
  // Waits until the queued copies are done.
  void finishCopies();

  std::shared_ptr<ProcessGroup> host_;
  const int device_;  // initialised first: the stream and event below belong to it
  const cudaStream_t compute_;
  CudaStream copies_;
  CudaEvent computeReady_;
  PinnedHostBuffer staging_;
};

}  // namespace dtrain
