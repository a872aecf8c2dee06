#include "core/backend/device_layers.h"

#include "core/backend/device_query.h"
#include "core/errors.h"

#if defined(DTRAIN_HAVE_CUDA)
#include "core/backend/cuda/cuda_layers.h"
#endif

namespace dtrain {

LayerRegistry layersFor(Device device) {
  if (device.isCpu()) return builtinLayers();
#if defined(DTRAIN_HAVE_CUDA)
  return cudaLayers(CudaContext::of(device.index));
#else
  throw noCudaBackendError(device);
#endif
}

}  // namespace dtrain
