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

// A weight two layers share (a layer's `tie`: a gpt's output layer and its
// token table) whose layers sit in different stages. The owner's stage keeps
// it as the whole model does; the borrower's stage holds a copy of its own,
// the layer untied there (stagePart), and the two gradients are summed before
// each update, so both copies take the same updates.
struct SharedWeight {
  std::string owner, borrower;  // layer names
  int owner_stage = 0, borrower_stage = 0;
};
// In the order of the borrowing layers in `whole`.
std::vector<SharedWeight> sharedAcrossStages(const Model& whole, const std::vector<int>& stage_of);

// `whole`: the model built from `specs`; `stage_of`: the stage of each of its
// nodes (in its topological order), stages in order of the nodes. A layer
// tied to one in another stage is untied in the stage's specs (SharedWeight).
StagePart stagePart(const Model& whole, const std::vector<LayerSpec>& specs, const std::vector<int>& stage_of,
                    int stage);

// The model as the split sees it: per node, its inputs as the specs name them
// (a fused layer's extra reads left out), its output per sample, and a cost:
// its forward FLOPs per sample times 3 (forward and a backward about twice
// as dear), until measured.
std::vector<LayerCost> layerCosts(const Model& whole, const std::vector<LayerSpec>& specs);

}  // namespace dtrain::pipeline
