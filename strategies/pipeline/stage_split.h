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
//                  minimise the slowest stage's time, its compute plus its
//                  copies of what crosses its cuts (each micro-batch's
//                  activations forward and their gradients back; the stages
//                  on both sides of a cut copy it), among the splits whose
//                  every stage fits a memory limit; then, among the splits
//                  within kTimeSlack of that time, the one whose largest
//                  stage memory is least (a stage's memory: its parameters'
//                  states, and its activations times the micro-batches the
//                  schedule has it hold at once, which 1f1b makes uneven).
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
  int64_t held_floats = 0;  // what it holds per micro-batch until its backward: output and gradient
  int64_t param_floats = 0;
};

// What a stage's memory is made of: per stage, the micro-batches whose
// activations it holds at once (the schedule's peak); per parameter, the
// bytes of its value, gradient and optimizer state; and the limit per stage
// (0: none).
struct StageMemory {
  std::vector<int> in_flight;
  double bytes_per_param = 0;
  int64_t limit_bytes = 0;
};

// Splits whose slowest stage is within this share of the fastest split's
// count as equally fast (measured layer times move more than that).
constexpr double kTimeSlack = 0.02;

struct StagePlan {
  std::vector<int> stage_of;            // per layer
  std::vector<double> compute_seconds;  // per stage
  std::vector<int64_t> cut_floats;      // per cut (stages - 1): what crosses it each way per micro-batch
  std::vector<int64_t> held_floats;     // per stage: what it holds per micro-batch in flight
  std::vector<int64_t> memory_bytes;    // per stage, as StageMemory counts it
};

// Throws ConfigError naming the layer.
StagePlan stagesByName(const std::vector<LayerCost>& layers,
                       const std::vector<std::vector<std::string>>& stages, const StageMemory& memory = {});

// `seconds_per_float`: what copying one float into or out of a message
// costs; a stage is charged it twice (forward and back) per float crossing
// each of its cuts. Throws ConfigError when
// there are more stages than layers, or no split fits the memory limit
// (naming the least any split needs).
StagePlan balancedStages(const std::vector<LayerCost>& layers, int stages, double seconds_per_float,
                         const StageMemory& memory = {});

// The floats crossing the cut after layer position `after` (0-based: between
// layers after and after + 1) when cut there: every output of a layer at or
// before it read by a layer after it.
int64_t crossingFloats(const std::vector<LayerCost>& layers, int after);

}  // namespace dtrain::pipeline
