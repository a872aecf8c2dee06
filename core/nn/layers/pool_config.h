// The configuration shared by max_pool and avg_pool. Options: kernel (int or
// pair, default 2), stride (default = kernel), padding (default 0, at most
// half the kernel, as PyTorch requires).
#pragma once
#include "core/backend/ops.h"
#include "core/config/layer_options.h"
#include "core/nn/layer.h"

namespace dtrain {

struct PoolConfig {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
};

// Reads kernel, stride and padding (not finish()).
PoolConfig readPoolConfig(const LayerOptions& options);
// Throws ConfigError naming the layer when the configuration is invalid
// (for layers built without options).
void checkPoolConfig(const Layer& layer, const PoolConfig& config);
// The window over input [C,H,W]; ShapeError naming the layer when it does not fit.
ops::Window2d poolGeometry(const Layer& layer, const PoolConfig& config, const std::vector<Shape>& inputs);
// "2x2 s2 p0"
std::string describePool(const PoolConfig& config);

}  // namespace dtrain
