// Which layers each pipeline stage runs. A model is a DAG of named layers in
// topological order; a stage is a set of layers, and the stages run in order,
// so every layer's inputs come from its own stage or an earlier one. A tensor
// used past the next stage (a skip connection) is relayed through every
// stage between, so it crosses every cut between its producer and its last
// reader.
//   stagesByName   [[strategy.stages]] layers = [...]: checked, with errors
//                  naming the layer (a layer in no stage or in two, an
//                  unknown name, an input from a later stage).
//   balancedStages automatic: contiguous runs of the topological order that
//                  minimise the slowest stage's time, its compute plus what
//                  it sends across its cut (each micro-batch's activations
//                  forward and their gradients back).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::pipeline {

// One layer as the split sees it, in the model's topological order.
struct LayerCost {
  std::string name;
  std::vector<int> inputs;  // indices of earlier layers; -1 is the network's input
  double seconds = 0;       // forward + backward of one micro-batch (measured, or predicted)
  int64_t out_floats = 0;   // its output per micro-batch: what crossing a cut moves
};

struct StagePlan {
  std::vector<int> stage_of;            // per layer
  std::vector<double> compute_seconds;  // per stage
  std::vector<int64_t> cut_floats;      // per cut (stages - 1): what crosses it each way per micro-batch
};

// Throws ConfigError naming the layer.
StagePlan stagesByName(const std::vector<LayerCost>& layers,
                       const std::vector<std::vector<std::string>>& stages);

// `seconds_per_float`: what moving one float across a cut costs (both ways
// together are charged to the stage before the cut). Throws ConfigError when
// there are more stages than layers.
StagePlan balancedStages(const std::vector<LayerCost>& layers, int stages, double seconds_per_float);

// The floats crossing the cut after layer position `after` (0-based: between
// layers after and after + 1) when cut there: every output of a layer at or
// before it read by a layer after it.
int64_t crossingFloats(const std::vector<LayerCost>& layers, int after);

}  // namespace dtrain::pipeline
