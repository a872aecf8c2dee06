#include "strategies/pipeline/stage_split.h"

#include <algorithm>
#include <limits>
#include <map>

#include "core/errors.h"

namespace dtrain::pipeline {

namespace {

std::string quoted(const std::string& name) { return "'" + name + "'"; }

// Per layer, the position of its last reader (itself when none reads it).
std::vector<int> lastReaders(const std::vector<LayerCost>& layers) {
  std::vector<int> last(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    last[i] = static_cast<int>(i);
    for (int in : layers[i].inputs)
      if (in >= 0)
        last[static_cast<size_t>(in)] = std::max(last[static_cast<size_t>(in)], static_cast<int>(i));
  }
  return last;
}

void checkInputs(const std::vector<LayerCost>& layers) {
  for (size_t i = 0; i < layers.size(); ++i)
    for (int in : layers[i].inputs)
      if (in < -1 || in >= static_cast<int>(i))
        throw Error("pipeline split: layer " + quoted(layers[i].name) + " reads layer " + std::to_string(in) +
                    ", which does not come before it");
}

// What crosses each cut of a plan whose stages are `stage_of`: every output
// read by a layer in a later stage crosses every cut up to that stage.
std::vector<int64_t> cutsOf(const std::vector<LayerCost>& layers, const std::vector<int>& stage_of,
                            int stages) {
  std::vector<int64_t> cuts(static_cast<size_t>(std::max(0, stages - 1)), 0);
  std::vector<int> last_stage(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) last_stage[i] = stage_of[i];
  for (size_t i = 0; i < layers.size(); ++i)
    for (int in : layers[i].inputs)
      if (in >= 0)
        last_stage[static_cast<size_t>(in)] = std::max(last_stage[static_cast<size_t>(in)], stage_of[i]);
  for (size_t i = 0; i < layers.size(); ++i)
    for (int c = stage_of[i]; c < last_stage[i]; ++c) cuts[static_cast<size_t>(c)] += layers[i].out_floats;
  return cuts;
}

StagePlan planOf(const std::vector<LayerCost>& layers, std::vector<int> stage_of, int stages) {
  StagePlan plan;
  plan.compute_seconds.assign(static_cast<size_t>(stages), 0.0);
  for (size_t i = 0; i < layers.size(); ++i)
    plan.compute_seconds[static_cast<size_t>(stage_of[i])] += layers[i].seconds;
  plan.cut_floats = cutsOf(layers, stage_of, stages);
  plan.stage_of = std::move(stage_of);
  return plan;
}

}  // namespace

int64_t crossingFloats(const std::vector<LayerCost>& layers, int after) {
  const std::vector<int> last = lastReaders(layers);
  int64_t floats = 0;
  for (int i = 0; i <= after && i < static_cast<int>(layers.size()); ++i)
    if (last[static_cast<size_t>(i)] > after) floats += layers[static_cast<size_t>(i)].out_floats;
  return floats;
}

StagePlan stagesByName(const std::vector<LayerCost>& layers,
                       const std::vector<std::vector<std::string>>& stages) {
  checkInputs(layers);
  std::map<std::string, int> position;
  for (size_t i = 0; i < layers.size(); ++i) position[layers[i].name] = static_cast<int>(i);
  std::vector<int> stage_of(layers.size(), -1);
  for (size_t k = 0; k < stages.size(); ++k) {
    const std::string where = "strategy.stages[" + std::to_string(k) + "]";
    if (stages[k].empty()) throw ConfigError(where + " lists no layers; give every stage at least one");
    for (const std::string& name : stages[k]) {
      auto it = position.find(name);
      if (it == position.end())
        throw ConfigError(where + " names layer " + quoted(name) + ", which the model does not have");
      int& stage = stage_of[static_cast<size_t>(it->second)];
      if (stage >= 0)
        throw ConfigError(where + " names layer " + quoted(name) + ", which strategy.stages[" +
                          std::to_string(stage) + "] holds already; put every layer in exactly one stage");
      stage = static_cast<int>(k);
    }
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (stage_of[i] < 0)
      throw ConfigError("strategy.stages: layer " + quoted(layers[i].name) +
                        " is in no stage; put every layer in exactly one stage");
    for (int in : layers[i].inputs) {
      if (in < 0 && stage_of[i] > 0)
        throw ConfigError("strategy.stages: layer " + quoted(layers[i].name) + " (stage " +
                          std::to_string(stage_of[i]) +
                          ") reads the network's input, which only stage 0 receives; move it to stage 0");
      if (in >= 0 && stage_of[static_cast<size_t>(in)] > stage_of[i])
        throw ConfigError("strategy.stages: layer " + quoted(layers[i].name) + " (stage " +
                          std::to_string(stage_of[i]) + ") reads " +
                          quoted(layers[static_cast<size_t>(in)].name) + " of the later stage " +
                          std::to_string(stage_of[static_cast<size_t>(in)]) + "; the stages run in order");
    }
  }
  return planOf(layers, std::move(stage_of), static_cast<int>(stages.size()));
}

StagePlan balancedStages(const std::vector<LayerCost>& layers, int stages, double seconds_per_float) {
  checkInputs(layers);
  const int n = static_cast<int>(layers.size());
  if (stages < 1 || stages > n)
    throw ConfigError("strategy.stages = " + std::to_string(stages) + " for a model of " + std::to_string(n) +
                      " layers: give each stage at least one layer");
  // The first cut may not come before a layer that reads the network's input.
  int first_cut = 0;
  for (int i = 0; i < n; ++i)
    for (int in : layers[static_cast<size_t>(i)].inputs)
      if (in < 0) first_cut = std::max(first_cut, i + 1);
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0.0);
  for (int i = 0; i < n; ++i)
    prefix[static_cast<size_t>(i) + 1] =
        prefix[static_cast<size_t>(i)] + layers[static_cast<size_t>(i)].seconds;
  std::vector<int64_t> crossing(static_cast<size_t>(n), 0);
  for (int j = 0; j < n; ++j) crossing[static_cast<size_t>(j)] = crossingFloats(layers, j);
  // The time of a stage of layers [i, j): compute, then its activations out
  // and their gradients back across the cut after it.
  auto cost = [&](int i, int j) {
    const double send =
        j < n ? 2.0 * static_cast<double>(crossing[static_cast<size_t>(j) - 1]) * seconds_per_float : 0.0;
    return prefix[static_cast<size_t>(j)] - prefix[static_cast<size_t>(i)] + send;
  };
  constexpr double kNone = std::numeric_limits<double>::infinity();
  // best[k][j]: the slowest stage of the best split of layers [0, j) into k + 1 stages.
  std::vector<std::vector<double>> best(static_cast<size_t>(stages),
                                        std::vector<double>(static_cast<size_t>(n) + 1, kNone));
  std::vector<std::vector<int>> from(static_cast<size_t>(stages),
                                     std::vector<int>(static_cast<size_t>(n) + 1, -1));
  for (int j = 1; j <= n; ++j) best[0][static_cast<size_t>(j)] = cost(0, j);
  for (int k = 1; k < stages; ++k)
    for (int j = k + 1; j <= n; ++j)
      for (int i = std::max(k, first_cut); i < j; ++i) {
        const double slowest = std::max(best[static_cast<size_t>(k) - 1][static_cast<size_t>(i)], cost(i, j));
        if (slowest < best[static_cast<size_t>(k)][static_cast<size_t>(j)]) {
          best[static_cast<size_t>(k)][static_cast<size_t>(j)] = slowest;
          from[static_cast<size_t>(k)][static_cast<size_t>(j)] = i;
        }
      }
  if (best[static_cast<size_t>(stages) - 1][static_cast<size_t>(n)] == kNone)
    throw ConfigError("strategy.stages = " + std::to_string(stages) + ": layers up to " +
                      quoted(layers[static_cast<size_t>(first_cut) - 1].name) +
                      " read the network's input and must share stage 0, which leaves too few layers for " +
                      std::to_string(stages) + " stages");
  std::vector<int> stage_of(static_cast<size_t>(n), 0);
  int j = n;
  for (int k = stages - 1; k >= 0; --k) {
    const int i = k == 0 ? 0 : from[static_cast<size_t>(k)][static_cast<size_t>(j)];
    for (int l = i; l < j; ++l) stage_of[static_cast<size_t>(l)] = k;
    j = i;
  }
  return planOf(layers, std::move(stage_of), stages);
}

}  // namespace dtrain::pipeline
