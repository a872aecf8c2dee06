// Helpers shared by the built-in layers: shape checks with messages that name
// the layer, and reading the options every weighted layer has.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/config/layer_options.h"
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"

namespace dtrain::layer_util {

// "layer 'conv1' (conv2d)"
std::string label(const Layer& layer);
// The single input's shape; ShapeError unless there is exactly one.
const Shape& singleInput(const Layer& layer, const std::vector<Shape>& inputs);
// "3x3", or "3" when square and `compact`.
std::string pairText(int64_t a, int64_t b, bool compact = false);
// The "init" option ("he" | "glorot", and "normal" where allowed), defaulting
// to the model's choice.
InitKind readInit(const LayerOptions& options, const LayerDefaults& defaults, bool allow_normal = false);
// The "init_std" option of a normal initialisation (>= 0).
double readInitStd(const LayerOptions& options, double fallback = 0.02);
// A pair option whose entries must be > 0 (or >= 0 when allow_zero).
std::pair<int64_t, int64_t> readPositivePair(const LayerOptions& options, const std::string& key,
                                             std::pair<int64_t, int64_t> fallback, bool allow_zero = false);
// Element count of one sample of `shape` (the shape has no batch extent).
inline int64_t perSample(const Tensor& t) { return t.dim(0) ? t.numel() / t.dim(0) : 0; }

}  // namespace dtrain::layer_util
