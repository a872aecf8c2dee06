// The `resnet` preset (He et al., "Deep Residual Learning for Image
// Recognition", 2015):
//   depth 6n+2 (20, 32, 44, 56, 110): the CIFAR network of section 4.2: a 3x3
//     convolution of 16 filters, three stages of n basic blocks with 16, 32
//     and 64 filters (the first block of stages 2 and 3 halves the size),
//     global average pooling and a dense layer. ResNet-20 has 0.27M parameters.
//   depth 18: the ImageNet ResNet-18 (7x7/2 convolution, 3x3/2 max pooling,
//     four stages of two basic blocks with 64..512 filters): 11.7M parameters
//     at 1000 classes.
// Every convolution is followed by batch norm, so none has a bias. Where a
// block changes the shape, its shortcut is a 1x1 convolution with batch norm
// (the paper's option B, as torchvision does).
#pragma once
#include <vector>

#include "core/config/job_config.h"

namespace dtrain {

std::vector<LayerSpec> resnetLayers(const ModelSection& model, int64_t classes);

}  // namespace dtrain
