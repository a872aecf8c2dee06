#include "core/nn/device_layers.h"

#include "core/backend/cuda_module.h"

namespace dtrain {

LayerRegistry layersFor(Device device, const GpuLayerOptions& gpu) {
  if (device.isCpu()) return builtinLayers();
  using Entry = void (*)(int device, const GpuLayerOptions* options, LayerRegistry* out);
  auto entry = reinterpret_cast<Entry>(cudaModuleEntry(kCudaLayersEntry, device));
  LayerRegistry layers;
  entry(device.index, &gpu, &layers);
  return layers;
}

}  // namespace dtrain
