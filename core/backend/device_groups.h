// Process groups for ranks that compute on GPUs, asked the same way with or
// without the CUDA backend (without it they throw DeviceError).
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "core/comm/process_group.h"
#include "core/comm/store.h"
#include "core/tensor/tensor.h"

namespace dtrain {

// NCCL over one GPU per rank (`device`: this rank's); collective.
std::shared_ptr<ProcessGroup> makeNcclGroup(Store& store, int rank, int size, Device device,
                                            std::chrono::milliseconds timeout);
// `host_group` (shared memory or Gloo) made to take buffers on `device` too,
// by staging them through host memory: lets several ranks share one GPU.
std::shared_ptr<ProcessGroup> stageThroughHost(std::shared_ptr<ProcessGroup> host_group, Device device);

}  // namespace dtrain
