// How a pipeline stage reaches its neighbours: the messages of its schedule
// to and from the stages before and after it. Three carriers:
//   over a process group's point-to-point messages (Gloo over TCP);
//   over shared memory on one host (ShmChannel): one ring per direction
//   between neighbours, each sized for every message of a step at once, so
//   a send never waits for a receive the schedule puts later;
//   between GPUs over NCCL (ncclSend / ncclRecv), device memory in place:
//   a group of two ranks per direction between neighbours, so that a send
//   and a receive never cross on one stream.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/comm/shm_channel.h"
#include "core/comm/store.h"
#include "core/tensor/tensor.h"

namespace dtrain::pipeline {

class StageLink {
 public:
  virtual ~StageLink() = default;
  // Starts sending to stage `to`; `data` stays untouched until waitSends().
  virtual void sendAsync(const void* data, int64_t bytes, int to, uint32_t tag) = 0;
  // The next message of `tag` from stage `from`, `bytes` long.
  virtual void recv(void* data, int64_t bytes, int from, uint32_t tag) = 0;
  virtual void waitSends() = 0;
  virtual std::string describe() const = 0;
  // Whether sends and receives take device memory in place (else host memory).
  virtual bool takesDeviceMemory() const { return false; }
};

// Over `group`, whose rank k is stage k.
std::unique_ptr<StageLink> groupLink(std::shared_ptr<ProcessGroup> group);

// Through shared memory with stage - 1 and stage + 1 of `stages` (those that
// exist). `from_before` and `from_after`: the bytes a step receives from
// each; `names` name the stages in errors; keys under `prefix` in `store`.
// Collective among the replica's stages.
std::unique_ptr<StageLink> sharedMemoryLink(Store& store, const std::string& prefix, int stage, int stages,
                                            int64_t from_before, int64_t from_after,
                                            const std::vector<std::string>& names,
                                            std::chrono::milliseconds timeout);

// Over NCCL between stage `stage` (on GPU `device`) and its neighbours, each
// stage on a GPU of its own; keys under `prefix` in `store`. Collective
// among the replica's stages: each makes its groups with the stage before
// first, then with the stage after, so the pairs meet in one order.
std::unique_ptr<StageLink> ncclLink(Store& store, const std::string& prefix, int stage, int stages,
                                    Device device, std::chrono::milliseconds timeout);

}  // namespace dtrain::pipeline
