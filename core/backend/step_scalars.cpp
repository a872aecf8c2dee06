#include "core/backend/step_scalars.h"

#include "core/backend/cuda_module.h"
#include "core/errors.h"

namespace dtrain {

std::unique_ptr<StepScalarsBuffer> StepScalarsBuffer::make(Device device) {
  if (device.isCpu()) throw Error("StepScalarsBuffer is for GPUs; CPU kernels take their scalars by value");
  return cudaBackend(device).stepScalars(device.index);
}

}  // namespace dtrain
