#include "core/comm/device_groups.h"

#include "core/backend/cuda_module.h"

namespace dtrain {

std::shared_ptr<ProcessGroup> makeNcclGroup(Store& store, int rank, int size, Device device,
                                            std::chrono::milliseconds timeout,
                                            const std::string& key_prefix) {
  using Entry = void (*)(Store*, const char*, int, int, int, int64_t, std::shared_ptr<ProcessGroup>*);
  auto entry = reinterpret_cast<Entry>(cudaModuleEntry(kCudaNcclGroupEntry, device));
  std::shared_ptr<ProcessGroup> group;
  entry(&store, key_prefix.c_str(), rank, size, device.index, static_cast<int64_t>(timeout.count()), &group);
  return group;
}

std::shared_ptr<ProcessGroup> stageThroughHost(std::shared_ptr<ProcessGroup> host_group, Device device) {
  using Entry = void (*)(std::shared_ptr<ProcessGroup>*, int);
  auto entry = reinterpret_cast<Entry>(cudaModuleEntry(kCudaStagedGroupEntry, device));
  entry(&host_group, device.index);
  return host_group;
}

}  // namespace dtrain
