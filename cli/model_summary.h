// The model table `dtrain check` prints: each layer with its output shape,
// parameter count, forward FLOPs per sample and the precision each pass
// computes in (the model's, Model::precision), and the totals.
#pragma once
#include <string>

#include "core/nn/model.h"

namespace dtrain::cli {

std::string modelSummary(const Model& model);

}  // namespace dtrain::cli
