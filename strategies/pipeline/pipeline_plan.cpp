#include "strategies/pipeline/pipeline_plan.h"

#include <algorithm>
#include <cstdio>

#include "core/nn/layer_registry.h"
#include "datasets/dataset_info.h"
#include "datasets/token_windows.h"
#include "models/model_builder.h"
#include "strategies/pipeline/layer_times.h"
#include "strategies/pipeline/schedule_check.h"
#include "strategies/pipeline/stage_model.h"

namespace dtrain::pipeline {

namespace {

// What one stage spends per float it copies into or out of a message: over
// shared memory a copy through the shared cache (about 8 GB/s, where one in
// cache runs at 24); over Gloo a pass through TCP (about 1.6 GB/s).
constexpr double kSecondsPerSharedFloat = 0.5e-9;
constexpr double kSecondsPerGlooFloat = 2.5e-9;

// The stages' messages go through shared memory when the collective allows
// it and the job runs on one host (several hosts: priced as Gloo, which the
// stages of a replica spread over hosts use).
double secondsPerCopiedFloat(const JobConfig& job) {
  const bool shared = stagesMayShareMemory(job.strategy) && job.cluster.hosts.size() <= 1;
  return shared ? kSecondsPerSharedFloat : kSecondsPerGlooFloat;
}

// Passes timed per layer for the automatic split, after one not counted.
constexpr int kTimedPasses = 5;
// A prediction's rate: what one core's float products reach on this kind of
// model (layerCosts counts a pass as 3 x the forward's FLOPs).
constexpr double kPredictedFlopsPerSecond = 2e10;

std::string megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

// The floats of optimizer state per parameter.
int optimizerStateFloats(const OptimizerSection& o) {
  if (o.type == "adam" || o.type == "adamw") return 2;
  return o.momentum > 0 ? 1 : 0;
}

}  // namespace

std::vector<LayerCost> pipelineCosts(const JobConfig& job, const Model& whole, int64_t classes, bool measure,
                                     const LayerRegistry& registry, Device device) {
  const std::vector<LayerSpec> specs = modelLayerSpecs(job.model, classes);
  const int64_t rows = microBatchRows(job.strategy, job.train.batch_size);
  std::vector<LayerCost> costs = layerCosts(whole, specs);
  // Per micro-batch: predicted from the FLOPs per sample, or timed.
  for (LayerCost& c : costs) {
    c.seconds *= static_cast<double>(rows) / kPredictedFlopsPerSecond;
    c.out_floats *= rows;
    c.held_floats *= rows;
  }
  if (!measure || !job.strategy.stage_layers.empty() || job.strategy.split_by != "time") return costs;
  const std::vector<double> seconds =
      measureLayerSeconds(specs, whole.inputShape(), registry, layerDefaultsOf(job.model), rows, kTimedPasses,
                          device, isTokenDataset(job.data.dataset) ? classes : 0);
  for (size_t i = 0; i < costs.size(); ++i) costs[i].seconds = seconds[i];
  return costs;
}

bool stagesMayShareMemory(const StrategySection& s) {
  return s.collective == "auto" || s.collective == "shared_memory" || s.collective == "hierarchical";
}

int64_t microBatchRows(const StrategySection& s, int64_t batch_size) {
  const int64_t slice = (batch_size + s.replicas - 1) / s.replicas;
  return (slice + s.micro_batches - 1) / s.micro_batches;
}

PipelinePlan planPipeline(const JobConfig& job, const Model& whole, const std::vector<LayerCost>& costs) {
  const StrategySection& s = job.strategy;
  PipelinePlan plan;
  plan.micro_batch_rows = microBatchRows(s, job.train.batch_size);
  plan.schedule = compileSchedule(ScheduleConfig{s.stages, s.micro_batches, s.schedule, s.replicas});
  // What each stage holds, for the split's memory: the schedule fixes how
  // many micro-batches' activations (1f1b: more on the early stages).
  StageMemory memory;
  memory.in_flight = checkSchedule(plan.schedule).peak_in_flight;
  memory.bytes_per_param = static_cast<double>(sizeof(float)) * (2 + optimizerStateFloats(job.optimizer));
  memory.limit_bytes = static_cast<int64_t>(s.stage_memory_mb * 1e6);
  const StagePlan split = s.stage_layers.empty()
                              ? balancedStages(costs, s.stages, secondsPerCopiedFloat(job), memory)
                              : stagesByName(costs, s.stage_layers, memory);
  plan.stage_of = split.stage_of;
  plan.stages.assign(static_cast<size_t>(s.stages), StageRow{});
  for (size_t i = 0; i < whole.nodes().size(); ++i) {
    StageRow& row = plan.stages[static_cast<size_t>(plan.stage_of[i])];
    const Model::Node& node = whole.nodes()[i];
    if (row.first.empty()) row.first = node.layer->name();
    row.last = node.layer->name();
    ++row.layers;
    row.parameters += costs[i].param_floats;
    row.seconds += costs[i].seconds;
  }
  // Every stage's time, forward a third and backward two thirds of it.
  std::vector<double> forward, backward;
  for (const StageRow& row : plan.stages) {
    forward.push_back(std::max(row.seconds, 1e-12) / 3);
    backward.push_back(2 * std::max(row.seconds, 1e-12) / 3);
  }
  const ScheduleReport report = checkSchedule(plan.schedule, forward, backward);
  plan.bubble_fraction = report.bubble_fraction;
  for (size_t k = 0; k < plan.stages.size(); ++k) {
    StageRow& row = plan.stages[k];
    row.peak_in_flight = report.peak_in_flight[k];
    row.activation_bytes = split.held_floats[k] * row.peak_in_flight * static_cast<int64_t>(sizeof(float));
    row.memory_bytes = split.memory_bytes[k];
    if (k + 1 < plan.stages.size()) {
      int last = -1;
      for (size_t i = 0; i < plan.stage_of.size(); ++i)
        if (plan.stage_of[i] == static_cast<int>(k)) last = static_cast<int>(i);
      row.sends_floats = crossingFloats(costs, last);
    }
  }
  return plan;
}

PipelinePlan planPipelineJob(const JobConfig& job, bool measure) {
  const DatasetInfo data = peekDataset(job.data);
  const auto whole = buildModel(job.model, data.sample_shape, data.classes, builtinLayers());
  return planPipeline(job, *whole,
                      pipelineCosts(job, *whole, data.classes, measure, builtinLayers(), Device::cpu()));
}

std::vector<LayerCost> costsMatching(std::vector<LayerCost> costs, const std::vector<int>& stage_of,
                                     const std::vector<double>& stage_seconds) {
  std::vector<double> predicted(stage_seconds.size(), 0.0);
  for (size_t i = 0; i < costs.size(); ++i) predicted[static_cast<size_t>(stage_of[i])] += costs[i].seconds;
  for (size_t i = 0; i < costs.size(); ++i) {
    const auto k = static_cast<size_t>(stage_of[i]);
    if (predicted[k] > 0) costs[i].seconds *= stage_seconds[k] / predicted[k];
  }
  return costs;
}

std::vector<std::string> describePlan(const PipelinePlan& plan, bool seconds_measured) {
  std::vector<std::string> out;
  char line[512];
  std::snprintf(line, sizeof line, "%-6s %-42s %7s %11s %12s %9s %12s %12s %12s", "stage", "layers", "count",
                "parameters", seconds_measured ? "ms/micro" : "predicted ms", "in flight", "activations",
                "memory", "sends/micro");
  out.push_back(line);
  for (size_t k = 0; k < plan.stages.size(); ++k) {
    const StageRow& r = plan.stages[k];
    const std::string layers = r.first == r.last ? r.first : r.first + " .. " + r.last;
    std::snprintf(line, sizeof line, "%-6zu %-42s %7d %11lld %12.3f %9d %12s %12s %12lld", k, layers.c_str(),
                  r.layers, static_cast<long long>(r.parameters), r.seconds * 1e3, r.peak_in_flight,
                  megabytes(r.activation_bytes).c_str(), megabytes(r.memory_bytes).c_str(),
                  static_cast<long long>(r.sends_floats));
    out.push_back(line);
  }
  const ScheduleConfig& c = plan.schedule.config;
  std::snprintf(
      line, sizeof line,
      "%s over %d micro-batches of up to %lld samples x %d replica%s: bubble %.1f%% of the stages' time "
      "(GPipe's (N-1)/(M+N-1) = %.1f%%)",
      c.kind.c_str(), c.micro_batches, static_cast<long long>(plan.micro_batch_rows), c.replicas,
      c.replicas == 1 ? "" : "s", 100 * plan.bubble_fraction,
      100.0 * (c.stages - 1) / (c.micro_batches + c.stages - 1));
  out.push_back(line);
  return out;
}

}  // namespace dtrain::pipeline
