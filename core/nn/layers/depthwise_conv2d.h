// depthwise_conv2d (Keras' DepthwiseConv2D): each input channel convolved
// with depth_multiplier filters of its own, as conv2d with groups = C and
// filters = C * depth_multiplier (PyTorch's form; weight [C*m, 1, kh, kw],
// output channel c*m + k from input channel c). Options: kernel (default 3),
// stride (default 1), padding (default 0), depth_multiplier (default 1, > 0),
// bias (default true), init ("he" | "glorot", default from the model; fan-in
// kh*kw). Everything else is Conv2d: this class only reads the options, so
// the GPU layer (CudaConv2d) serves both types.
#pragma once
#include <memory>
#include <string>

#include "core/nn/layers/conv2d.h"

namespace dtrain {

class DepthwiseConv2d : public Conv2d {
 public:
  using Conv2d::Conv2d;  // a Conv2dConfig with depth_multiplier > 0
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);
};

}  // namespace dtrain
