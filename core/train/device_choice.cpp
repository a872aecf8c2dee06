#include "core/train/device_choice.h"

#include "core/backend/device_ops.h"
#include "core/backend/device_query.h"
#include "core/errors.h"

namespace dtrain {

Device resolveDevice(const std::string& configured, int local_index) {
  if (configured == "cpu") return Device::cpu();
  const bool built = cudaBackendBuilt();
  const int gpus = built ? visibleCudaDevices() : 0;
  if (configured == "auto") return gpus > 0 ? Device::cuda(local_index % gpus) : Device::cpu();
  if (!built)
    throw ConfigError(
        "[job] device = \"cuda\": this dtrain was built without the CUDA backend (the CUDA toolkit, cuBLAS, "
        "cuDNN or NCCL was missing when it was configured); rebuild with them, or use device = \"cpu\"");
  if (gpus == 0)
    throw ConfigError(
        "[job] device = \"cuda\": no CUDA device is visible to this process (check the driver and "
        "CUDA_VISIBLE_DEVICES); use device = \"cpu\" or \"auto\"");
  return Device::cuda(local_index % gpus);
}

Device computeDevice(const JobSection& job, int local_index) {
  const Device device = resolveDevice(job.device, local_index);
  if (!device.isCpu()) device_ops::setTf32(device, job.precision == "tf32");
  return device;
}

std::string describeDevice(Device device) {
  if (device.isCpu()) return "cpu";
  const std::string name = cudaDeviceName(device.index);
  return device.str() + (name.empty() ? "" : " (" + name + ")");
}

}  // namespace dtrain
