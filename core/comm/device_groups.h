// Process groups for ranks that compute on GPUs, asked the same way with or
// without the CUDA backend; they live in the CUDA backend module
// (core/comm/cuda/), reached through its entry points, and throw DeviceError
// where the build or the host cannot drive `device`.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "core/comm/process_group.h"
#include "core/comm/store.h"
#include "core/tensor/tensor.h"

namespace dtrain {

// The module's C functions behind the two calls below.
// void (Store*, const char* key_prefix, int rank, int size, int device, int64_t timeout_ms,
//       std::shared_ptr<ProcessGroup>* out)
inline constexpr const char* kCudaNcclGroupEntry = "dtrain_cuda_nccl_group_v2";
// void (std::shared_ptr<ProcessGroup>* in_out, int device)
inline constexpr const char* kCudaStagedGroupEntry = "dtrain_cuda_staged_group_v1";

// NCCL over one GPU per rank (`device`: this rank's); collective. Groups
// made from one store need key prefixes of their own (the NCCL id's key).
std::shared_ptr<ProcessGroup> makeNcclGroup(Store& store, int rank, int size, Device device,
                                            std::chrono::milliseconds timeout,
                                            const std::string& key_prefix = "nccl");
// `host_group` (shared memory or Gloo) made to take buffers on `device` too,
// by staging them through host memory: lets several ranks share one GPU.
std::shared_ptr<ProcessGroup> stageThroughHost(std::shared_ptr<ProcessGroup> host_group, Device device);

}  // namespace dtrain
