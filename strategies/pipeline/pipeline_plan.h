// How a pipeline job cuts its model: which stage each layer runs in (named
// by [[strategy.stages]], or balanced from the layers' costs), the compiled
// schedule, and per stage what `dtrain check` and the start-up line show:
// its layers, parameters, time per micro-batch, activation memory with the
// schedule's peak of micro-batches in flight, and the floats it sends on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/job_config.h"
#include "core/nn/layer_registry.h"
#include "core/nn/model.h"
#include "strategies/pipeline/schedule.h"
#include "strategies/pipeline/stage_split.h"

namespace dtrain::pipeline {

struct StageRow {
  std::string first, last;  // its first and last layer
  int layers = 0;
  int64_t parameters = 0;
  double seconds = 0;            // forward + backward of one micro-batch
  int peak_in_flight = 0;        // micro-batches whose activations it holds at once
  int64_t activation_bytes = 0;  // at that peak
  int64_t memory_bytes = 0;      // those, and its parameters' values, gradients and optimizer state
  int64_t sends_floats = 0;      // per micro-batch across the cut after it
};

struct PipelinePlan {
  std::vector<int> stage_of;  // per layer of the whole model
  Schedule schedule;
  std::vector<StageRow> stages;
  double bubble_fraction = 0;  // the schedule run with the stages' times
  int64_t micro_batch_rows = 0;
};

// The rows of one micro-batch: a replica's slice of the global batch, cut in
// `micro_batches` (the largest, when they differ).
int64_t microBatchRows(const StrategySection& s, int64_t batch_size);

// Whether [strategy] collective lets a replica's stages on one host message
// through shared memory: any value but a Gloo algorithm ("hierarchical"
// concerns all-reduces, so the stages' messages go as under "auto").
bool stagesMayShareMemory(const StrategySection& s);

// `costs`: per layer of `whole` (pipelineCosts, with measured seconds or
// predicted ones). Throws ConfigError naming the layer or the key.
PipelinePlan planPipeline(const JobConfig& job, const Model& whole, const std::vector<LayerCost>& costs);

// Each layer's cost for the split: timed on a micro-batch on `device`, its
// layers `registry`'s (layer_times.h), when `measure`, the stages are not
// named and the split is by time, else its FLOPs (layerCosts). `classes`:
// the data's, which built `whole`.
std::vector<LayerCost> pipelineCosts(const JobConfig& job, const Model& whole, int64_t classes, bool measure,
                                     const LayerRegistry& registry, Device device);

// The job's plan, its model built on its dataset's shape (read from the
// files' headers): what `dtrain check` shows, and what `dtrain train`
// checks before starting any process.
PipelinePlan planPipelineJob(const JobConfig& job, bool measure);

// `costs` with each layer's seconds scaled so that every stage of the split
// `stage_of` sums to what it measured per micro-batch (`stage_seconds`):
// the layers timed alone miss what running beside the other stages costs.
std::vector<LayerCost> costsMatching(std::vector<LayerCost> costs, const std::vector<int>& stage_of,
                                     const std::vector<double>& stage_seconds);

// The stage table, one line per stage, then the schedule's line.
std::vector<std::string> describePlan(const PipelinePlan& plan, bool seconds_measured);

}  // namespace dtrain::pipeline
