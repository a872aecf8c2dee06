// The layer registry of a GPU: every built-in layer type, parsed and shaped
// by its CPU class and computed by its CUDA subclass on `ctx`'s device.
#pragma once
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

// A type without a CUDA implementation fails when created, naming itself.
LayerRegistry cudaLayers(CudaContext& ctx);

}  // namespace dtrain
