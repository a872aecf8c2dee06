// The module's entry points for core/comm/device_groups.cpp: the NCCL group
// and the host-staged group on a device's compute stream.
#include <chrono>
#include <memory>

#include "core/backend/cuda/cuda_context.h"
#include "core/comm/cuda/host_staged_group.h"
#include "core/comm/cuda/nccl_process_group.h"
#include "core/comm/device_groups.h"

extern "C" void dtrain_cuda_nccl_group_v2(dtrain::Store* store, const char* key_prefix, int rank, int size,
                                          int device, int64_t timeout_ms,
                                          std::shared_ptr<dtrain::ProcessGroup>* out) {
  dtrain::CudaContext& ctx = dtrain::CudaContext::of(device);
  *out = std::make_shared<dtrain::NcclProcessGroup>(*store, key_prefix, rank, size, device, ctx.stream(),
                                                    std::chrono::milliseconds(timeout_ms));
}

extern "C" void dtrain_cuda_staged_group_v1(std::shared_ptr<dtrain::ProcessGroup>* in_out, int device) {
  dtrain::CudaContext& ctx = dtrain::CudaContext::of(device);
  *in_out = std::make_shared<dtrain::HostStagedGroup>(std::move(*in_out), device, ctx.stream());
}
