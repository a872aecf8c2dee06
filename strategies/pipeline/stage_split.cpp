#include "strategies/pipeline/stage_split.h"

#include <algorithm>
#include <cstdio>
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

// What stage k holds: `held` floats per micro-batch in flight, and the
// states of `params` parameters.
double stageBytes(int64_t held, int64_t params, int k, const StageMemory& memory) {
  const int in_flight =
      static_cast<size_t>(k) < memory.in_flight.size() ? memory.in_flight[static_cast<size_t>(k)] : 1;
  return static_cast<double>(held) * static_cast<double>(sizeof(float)) * in_flight +
         static_cast<double>(params) * memory.bytes_per_param;
}

std::string megabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
  return text;
}

constexpr double kNone = std::numeric_limits<double>::infinity();

struct Split {
  double worst = kNone;  // the largest stage cost
  std::vector<int> stage_of;
};

// The split of layers [0, n) into `stages` contiguous runs, the first cut at
// or after `first_cut`, whose largest cost(i, j, k) (stage k of layers
// [i, j)) is least; worst is kNone when every split costs kNone somewhere.
template <typename Cost>
Split minMaxSplit(int n, int stages, int first_cut, Cost&& cost) {
  // best[k][j]: the largest stage cost of the best split of layers [0, j) into k + 1 stages.
  std::vector<std::vector<double>> best(static_cast<size_t>(stages),
                                        std::vector<double>(static_cast<size_t>(n) + 1, kNone));
  std::vector<std::vector<int>> from(static_cast<size_t>(stages),
                                     std::vector<int>(static_cast<size_t>(n) + 1, -1));
  for (int j = 1; j <= n; ++j) best[0][static_cast<size_t>(j)] = cost(0, j, 0);
  for (int k = 1; k < stages; ++k)
    for (int j = k + 1; j <= n; ++j)
      for (int i = std::max(k, first_cut); i < j; ++i) {
        const double worst =
            std::max(best[static_cast<size_t>(k) - 1][static_cast<size_t>(i)], cost(i, j, k));
        if (worst < best[static_cast<size_t>(k)][static_cast<size_t>(j)]) {
          best[static_cast<size_t>(k)][static_cast<size_t>(j)] = worst;
          from[static_cast<size_t>(k)][static_cast<size_t>(j)] = i;
        }
      }
  Split out;
  out.worst = best[static_cast<size_t>(stages) - 1][static_cast<size_t>(n)];
  if (out.worst == kNone) return out;
  out.stage_of.assign(static_cast<size_t>(n), 0);
  int j = n;
  for (int k = stages - 1; k >= 0; --k) {
    const int i = k == 0 ? 0 : from[static_cast<size_t>(k)][static_cast<size_t>(j)];
    for (int l = i; l < j; ++l) out.stage_of[static_cast<size_t>(l)] = k;
    j = i;
  }
  return out;
}

StagePlan planOf(const std::vector<LayerCost>& layers, std::vector<int> stage_of, int stages,
                 const StageMemory& memory) {
  StagePlan plan;
  plan.compute_seconds.assign(static_cast<size_t>(stages), 0.0);
  plan.held_floats.assign(static_cast<size_t>(stages), 0);
  std::vector<int64_t> params(static_cast<size_t>(stages), 0);
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto k = static_cast<size_t>(stage_of[i]);
    plan.compute_seconds[k] += layers[i].seconds;
    plan.held_floats[k] += layers[i].held_floats;
    params[k] += layers[i].param_floats;
  }
  for (int k = 0; k < stages; ++k)
    plan.memory_bytes.push_back(static_cast<int64_t>(
        stageBytes(plan.held_floats[static_cast<size_t>(k)], params[static_cast<size_t>(k)], k, memory)));
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
                       const std::vector<std::vector<std::string>>& stages, const StageMemory& memory) {
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
  return planOf(layers, std::move(stage_of), static_cast<int>(stages.size()), memory);
}

StagePlan balancedStages(const std::vector<LayerCost>& layers, int stages, double seconds_per_float,
                         const StageMemory& memory) {
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
  std::vector<double> seconds(static_cast<size_t>(n) + 1, 0.0);
  std::vector<int64_t> held(static_cast<size_t>(n) + 1, 0), params(static_cast<size_t>(n) + 1, 0);
  for (size_t i = 0; i < layers.size(); ++i) {
    seconds[i + 1] = seconds[i] + layers[i].seconds;
    held[i + 1] = held[i] + layers[i].held_floats;
    params[i + 1] = params[i] + layers[i].param_floats;
  }
  std::vector<int64_t> crossing(static_cast<size_t>(n), 0);
  for (int j = 0; j < n; ++j) crossing[static_cast<size_t>(j)] = crossingFloats(layers, j);
  // The time of stage k of layers [i, j): compute, and the copies of what
  // crosses the cuts before and after it, activations one way and their
  // gradients the other (both sides of a cut copy every float).
  auto time = [&](int i, int j, int /*k*/) {
    int64_t copied = j < n ? crossing[static_cast<size_t>(j) - 1] : 0;
    if (i > 0) copied += crossing[static_cast<size_t>(i) - 1];
    return seconds[static_cast<size_t>(j)] - seconds[static_cast<size_t>(i)] +
           2.0 * static_cast<double>(copied) * seconds_per_float;
  };
  auto bytes = [&](int i, int j, int k) {
    return stageBytes(held[static_cast<size_t>(j)] - held[static_cast<size_t>(i)],
                      params[static_cast<size_t>(j)] - params[static_cast<size_t>(i)], k, memory);
  };
  auto fits = [&](int i, int j, int k) {
    return memory.limit_bytes <= 0 || bytes(i, j, k) <= static_cast<double>(memory.limit_bytes);
  };
  const Split fastest = minMaxSplit(
      n, stages, first_cut, [&](int i, int j, int k) { return fits(i, j, k) ? time(i, j, k) : kNone; });
  if (fastest.worst == kNone) {
    if (first_cut > n - stages + 1)
      throw ConfigError("strategy.stages = " + std::to_string(stages) + ": layers up to " +
                        quoted(layers[static_cast<size_t>(first_cut) - 1].name) +
                        " read the network's input and must share stage 0, which leaves too few layers for " +
                        std::to_string(stages) + " stages");
    const Split least = minMaxSplit(n, stages, first_cut, bytes);
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", static_cast<double>(memory.limit_bytes) / 1e6);
    throw ConfigError("strategy.stage_memory_mb = " + std::string(limit) + ": no split into " +
                      std::to_string(stages) + " stages fits; the least any needs is " +
                      megabytes(least.worst) +
                      " for its largest stage; raise the limit, use more stages or micro-batches, or a "
                      "smaller batch");
  }
  // As fast, within the slack, and needing less memory: that one.
  const double slow_enough = fastest.worst * (1 + kTimeSlack);
  const Split leanest = minMaxSplit(n, stages, first_cut, [&](int i, int j, int k) {
    return fits(i, j, k) && time(i, j, k) <= slow_enough ? bytes(i, j, k) : kNone;
  });
  StagePlan plan = planOf(layers, fastest.stage_of, stages, memory);
  const auto peak = [](const StagePlan& p) {
    return *std::max_element(p.memory_bytes.begin(), p.memory_bytes.end());
  };
  if (leanest.worst != kNone) {
    StagePlan lean = planOf(layers, leanest.stage_of, stages, memory);
    if (peak(lean) < peak(plan)) return lean;
  }
  return plan;
}

}  // namespace dtrain::pipeline
