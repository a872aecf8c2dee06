#include "core/backend/device_loss.h"

#include "core/backend/cuda_module.h"
#include "core/errors.h"

namespace dtrain {

std::unique_ptr<DeviceLoss> DeviceLoss::make(Device device, int64_t classes, int64_t width) {
  if (device.isCpu())
    throw Error("DeviceLoss is for GPUs; the CPU computes ops::softmaxCrossEntropy directly");
  return cudaBackend(device).makeLoss(device.index, classes, width);
}

LossSums DeviceLoss::read() {
  if (pendingSnapshots() > 0)
    throw Error("DeviceLoss::read with " + std::to_string(pendingSnapshots()) +
                " training snapshot(s) not taken; take them first");
  snapshot();
  return takeSnapshot();
}

}  // namespace dtrain
