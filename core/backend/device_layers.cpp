#include "core/backend/device_layers.h"

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
  throw DeviceError(
      "device " + device.str() +
      ": this dtrain was built without the CUDA backend; rebuild with it or use device = \"cpu\"");
#endif
}

}  // namespace dtrain
