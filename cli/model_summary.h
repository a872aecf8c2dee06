// The model table `dtrain check` prints: each layer with its output shape,
// parameter count and forward FLOPs per sample, and the totals.
#pragma once
#include <string>

#include "core/nn/model.h"

namespace dtrain::cli {

std::string modelSummary(const Model& model);

}  // namespace dtrain::cli
