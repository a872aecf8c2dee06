// What each layer of a model costs on this process's device (its CPU thread,
// or its GPU, timed by events on the GPU's stream): its forward
// and backward on a micro-batch of random samples, the median of a few passes
// after a warm-up, so that the automatic stage split balances measured time
// rather than counted FLOPs (which miss memory-bound layers: batch norm,
// activations, pooling, and small convolutions' lower efficiency).
#pragma once
#include <cstdint>
#include <vector>

#include "core/config/job_config.h"
#include "core/nn/layer_registry.h"
#include "core/tensor/shape.h"
#include "core/tensor/tensor.h"

namespace dtrain::pipeline {

// Seconds per pass (forward + backward) of each layer of the model built
// from `specs`, in its topological order; layers fused into another (whose
// work the other does) cost 0. The input is random normal values, or, with
// `token_vocab` > 0 (a language model's token windows), random ids below it.
std::vector<double> measureLayerSeconds(const std::vector<LayerSpec>& specs, const Shape& input,
                                        const LayerRegistry& registry, const LayerDefaults& defaults,
                                        int64_t rows, int passes, Device device = Device::cpu(),
                                        int64_t token_vocab = 0);

}  // namespace dtrain::pipeline
