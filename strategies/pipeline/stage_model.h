// One pipeline stage's layers as a model of their own (core/nn/model.h's
// ModelCut): the stage's layer specs with every input named, the results of
// earlier stages it reads (their shapes, and whether a gradient goes back to
// them), and its results that later stages read. A tensor read past the next
// stage is an input of every stage that reads it; carrying it through the
// stages between is the transport's concern.
#pragma once
#include <vector>

#include "core/config/job_config.h"
#include "core/nn/model.h"
#include "strategies/pipeline/stage_split.h"

namespace dtrain::pipeline {

struct StagePart {
  std::vector<LayerSpec> specs;  // in `whole`'s topological order
  ModelCut cut;
};

// `whole`: the model built from `specs`; `stage_of`: the stage of each of its
// nodes (in its topological order), stages in order of the nodes.
StagePart stagePart(const Model& whole, const std::vector<LayerSpec>& specs, const std::vector<int>& stage_of,
                    int stage);

// The model as the split sees it: per node, its inputs as the specs name them
// (a fused layer's extra reads left out), its output per sample, and a cost:
// its forward FLOPs per sample times 3 (forward and a backward about twice
// as dear), until measured.
std::vector<LayerCost> layerCosts(const Model& whole, const std::vector<LayerSpec>& specs);

}  // namespace dtrain::pipeline
