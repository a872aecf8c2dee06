// The layer registry for a compute device: the built-in CPU layers, or the
// CUDA backend module's versions of them for a GPU (core/nn/cuda/, reached
// through the module's entry point). Throws DeviceError for a device this
// build or host cannot drive.
#pragma once
#include "core/nn/gpu_layer_options.h"
#include "core/nn/layer_registry.h"
#include "core/tensor/tensor.h"

namespace dtrain {

// The module's C function that fills a registry with device `device`'s layers.
inline constexpr const char* kCudaLayersEntry =
    "dtrain_cuda_layers_v2";  // void (int, const GpuLayerOptions*, LayerRegistry*)

// `gpu` is read by a GPU's layers only; its cache must outlive them.
LayerRegistry layersFor(Device device, const GpuLayerOptions& gpu = {});

}  // namespace dtrain
