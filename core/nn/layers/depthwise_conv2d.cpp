#include "core/nn/layers/depthwise_conv2d.h"

#include <tuple>

#include "core/nn/layers/layer_util.h"

namespace dtrain {

std::unique_ptr<Layer> DepthwiseConv2d::create(const std::string& name, const LayerOptions& options,
                                               const LayerDefaults& defaults) {
  Conv2dConfig c;
  std::tie(c.kernel_h, c.kernel_w) = layer_util::readPositivePair(options, "kernel", {3, 3});
  std::tie(c.stride_h, c.stride_w) = layer_util::readPositivePair(options, "stride", {1, 1});
  std::tie(c.pad_h, c.pad_w) = layer_util::readPositivePair(options, "padding", {0, 0}, true);
  c.depth_multiplier = options.getInt("depth_multiplier", 1);
  if (c.depth_multiplier <= 0)
    options.fail("depth_multiplier",
                 "depth_multiplier must be > 0 (got " + std::to_string(c.depth_multiplier) + ")");
  c.bias = options.getBool("bias", true);
  c.init = layer_util::readInit(options, defaults);
  options.finish();
  return std::make_unique<DepthwiseConv2d>(name, c);
}

}  // namespace dtrain
