// The layer registry for a compute device: the built-in CPU layers, or the
// CUDA backend's versions of them for a GPU. Throws DeviceError for a device
// this build cannot drive.
#pragma once
#include "core/nn/layer_registry.h"
#include "core/tensor/tensor.h"

namespace dtrain {

LayerRegistry layersFor(Device device);

}  // namespace dtrain
