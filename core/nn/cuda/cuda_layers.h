// The layer registry of a GPU: every built-in layer type, parsed and shaped
// by its CPU class and computed by its CUDA subclass on `ctx`'s device.
#pragma once
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/gpu_layer_options.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

// A type without a CUDA implementation fails when created, naming itself.
// The layers choose their library algorithms as `gpu` says; its cache, when
// given, is opened for this GPU and its libraries here.
LayerRegistry cudaLayers(CudaContext& ctx, const GpuLayerOptions& gpu = {});

}  // namespace dtrain
