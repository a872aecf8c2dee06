#include "core/nn/layers/pool_config.h"

#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

PoolConfig readPoolConfig(const LayerOptions& options) {
  PoolConfig c;
  std::tie(c.kernel_h, c.kernel_w) = layer_util::readPositivePair(options, "kernel", {2, 2});
  std::tie(c.stride_h, c.stride_w) =
      layer_util::readPositivePair(options, "stride", {c.kernel_h, c.kernel_w});
  std::tie(c.pad_h, c.pad_w) = layer_util::readPositivePair(options, "padding", {0, 0}, true);
  // Wider padding would create windows that see only padding.
  if (2 * c.pad_h > c.kernel_h || 2 * c.pad_w > c.kernel_w)
    options.fail("padding", "padding must be at most half the kernel (got padding " +
                                layer_util::pairText(c.pad_h, c.pad_w, true) + " for kernel " +
                                layer_util::pairText(c.kernel_h, c.kernel_w) + ")");
  return c;
}

void checkPoolConfig(const Layer& layer, const PoolConfig& c) {
  if (c.kernel_h <= 0 || c.kernel_w <= 0 || c.stride_h <= 0 || c.stride_w <= 0 || c.pad_h < 0 ||
      c.pad_w < 0 || 2 * c.pad_h > c.kernel_h || 2 * c.pad_w > c.kernel_w)
    throw ConfigError(layer_util::label(layer) +
                      ": kernel and stride must be > 0 and padding between 0 and half the kernel");
}

ops::Window2d poolGeometry(const Layer& layer, const PoolConfig& c, const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(layer, inputs);
  if (s.rank() != 3)
    throw ShapeError(layer_util::label(layer) + " expects an input [channels,height,width], got " + s.str());
  if (s[1] + 2 * c.pad_h < c.kernel_h || s[2] + 2 * c.pad_w < c.kernel_w)
    throw ShapeError(layer_util::label(layer) + ": kernel " + layer_util::pairText(c.kernel_h, c.kernel_w) +
                     " with padding " + layer_util::pairText(c.pad_h, c.pad_w, true) +
                     " does not fit input " + s.str());
  return ops::Window2d{s[0], s[1], s[2], c.kernel_h, c.kernel_w, c.stride_h, c.stride_w, c.pad_h, c.pad_w};
}

std::string describePool(const PoolConfig& c) {
  return layer_util::pairText(c.kernel_h, c.kernel_w) + " s" +
         layer_util::pairText(c.stride_h, c.stride_w, true) + " p" +
         layer_util::pairText(c.pad_h, c.pad_w, true);
}

}  // namespace dtrain
