// The `mobilenet_v2` preset (Sandler et al., "MobileNetV2: Inverted Residuals
// and Linear Bottlenecks", 2018), laid out as torchvision's mobilenet_v2: a
// 3x3/2 convolution of 32 filters, 17 inverted-residual blocks (1x1 expansion,
// 3x3 depthwise, linear 1x1 projection; a residual add where the shape is
// kept), a 1x1 convolution to 1280 channels, global average pooling, dropout
// ([model] dropout, 0 = none) and a dense layer. Every convolution is followed
// by batch norm (no bias) and all but the projections by relu6.
// [model] width multiplies every layer's channels, rounded to multiples of 8
// as the paper's reference code does (the last layer's 1280 only grows).
// The input size is the dataset's (e.g. [data] image_size = [96, 96]).
// Width 1.0 at 1000 classes: 3,504,872 parameters.
#pragma once
#include <vector>

#include "core/config/job_config.h"

namespace dtrain {

std::vector<LayerSpec> mobilenetV2Layers(const ModelSection& model, int64_t classes);

// The channel count nearest v that is a multiple of 8, not 10% below v.
int64_t roundChannels(double v);

}  // namespace dtrain
