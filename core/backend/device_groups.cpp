#include "core/backend/device_groups.h"

#include "core/backend/device_query.h"
#include "core/errors.h"

#if defined(DTRAIN_HAVE_CUDA)
#include "core/backend/cuda/cuda_context.h"
#include "core/backend/cuda/host_staged_group.h"
#include "core/backend/cuda/nccl_process_group.h"
#endif

namespace dtrain {

#if defined(DTRAIN_HAVE_CUDA)

std::shared_ptr<ProcessGroup> makeNcclGroup(Store& store, int rank, int size, Device device,
                                            std::chrono::milliseconds timeout) {
  CudaContext& ctx = CudaContext::of(device.index);
  return std::make_shared<NcclProcessGroup>(store, "nccl", rank, size, device.index, ctx.stream(), timeout);
}

std::shared_ptr<ProcessGroup> stageThroughHost(std::shared_ptr<ProcessGroup> host_group, Device device) {
  CudaContext& ctx = CudaContext::of(device.index);
  return std::make_shared<HostStagedGroup>(std::move(host_group), device.index, ctx.stream());
}

#else

std::shared_ptr<ProcessGroup> makeNcclGroup(Store&, int, int, Device device, std::chrono::milliseconds) {
  throw noCudaBackendError(device);
}
std::shared_ptr<ProcessGroup> stageThroughHost(std::shared_ptr<ProcessGroup>, Device device) {
  throw noCudaBackendError(device);
}

#endif

}  // namespace dtrain
