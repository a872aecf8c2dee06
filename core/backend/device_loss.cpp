#include "core/backend/device_loss.h"

#include "core/backend/device_query.h"
#include "core/errors.h"

#if defined(DTRAIN_HAVE_CUDA)
#include "core/backend/cuda/cuda_loss.h"
#endif

namespace dtrain {

std::unique_ptr<DeviceLoss> DeviceLoss::make(Device device, int64_t classes) {
  if (device.isCpu())
    throw Error("DeviceLoss is for GPUs; the CPU computes ops::softmaxCrossEntropy directly");
#if defined(DTRAIN_HAVE_CUDA)
  return std::make_unique<CudaLoss>(CudaContext::of(device.index), classes);
#else
  throw noCudaBackendError(device);
#endif
}

}  // namespace dtrain
