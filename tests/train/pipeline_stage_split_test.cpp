// Pipeline stages: a split given by layer names, checked with errors that
// name the layer; the automatic split against a brute force over every
// contiguous split; and what crosses each cut, skip connections included.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/errors.h"
#include "strategies/pipeline/stage_split.h"

using namespace dtrain;
using namespace dtrain::pipeline;

namespace {

// a chain: each layer reads the one before (the first the network's input).
std::vector<LayerCost> chain(const std::vector<double>& seconds, int64_t floats = 10) {
  std::vector<LayerCost> out;
  for (size_t i = 0; i < seconds.size(); ++i)
    out.push_back({"l" + std::to_string(i), {static_cast<int>(i) - 1}, seconds[i], floats});
  return out;
}

// conv1 -> conv2 -> conv3 -> add(conv1, conv3) -> fc: conv1's output skips two layers.
std::vector<LayerCost> residual() {
  return {{"conv1", {-1}, 2, 100},
          {"conv2", {0}, 2, 50},
          {"conv3", {1}, 2, 100},
          {"add", {0, 2}, 0.5, 100},
          {"fc", {3}, 1, 10}};
}

std::string refusal(const std::vector<LayerCost>& layers,
                    const std::vector<std::vector<std::string>>& stages) {
  try {
    stagesByName(layers, stages);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// The slowest stage of a contiguous split (stage_of ascending), priced as balancedStages prices it.
double slowest(const std::vector<LayerCost>& layers, const std::vector<int>& stage_of, double spf) {
  const int stages = stage_of.back() + 1;
  std::vector<double> t(static_cast<size_t>(stages), 0.0);
  for (size_t i = 0; i < layers.size(); ++i) {
    t[static_cast<size_t>(stage_of[i])] += layers[i].seconds;
    if (i + 1 < layers.size() && stage_of[i + 1] != stage_of[i])
      for (const int side : {stage_of[i], stage_of[i + 1]})
        t[static_cast<size_t>(side)] += 2.0 * crossingFloats(layers, static_cast<int>(i)) * spf;
  }
  return *std::max_element(t.begin(), t.end());
}

}  // namespace

TEST_CASE("pipeline split: stages by name hold their layers' time and what crosses each cut") {
  const StagePlan p = stagesByName(residual(), {{"conv1", "conv2"}, {"conv3", "add"}, {"fc"}});
  CHECK(p.stage_of == std::vector<int>{0, 0, 1, 1, 2});
  CHECK(p.compute_seconds == std::vector<double>{4, 2.5, 1});
  // Cut 0: conv2's output (50) and conv1's, which the add reads (100); cut 1: the add's (100).
  CHECK(p.cut_floats == std::vector<int64_t>{150, 100});
}

TEST_CASE("pipeline split: what crosses a cut includes every skip connection over it") {
  const std::vector<LayerCost> r = residual();
  CHECK(crossingFloats(r, 0) == 100);        // conv1's, read by conv2 and the add
  CHECK(crossingFloats(r, 1) == 100 + 50);   // conv1's (for the add) and conv2's
  CHECK(crossingFloats(r, 2) == 100 + 100);  // conv1's and conv3's
  CHECK(crossingFloats(r, 3) == 100);        // the add's
  CHECK(crossingFloats(r, 4) == 0);          // nothing after the last layer
}

TEST_CASE("pipeline split: a split by name that cannot run is refused naming the layer") {
  const std::vector<LayerCost> r = residual();
  CHECK(refusal(r, {{"conv1", "conv2"}, {"conv3", "add"}}) ==
        "strategy.stages: layer 'fc' is in no stage; put every layer in exactly one stage");
  CHECK(refusal(r, {{"conv1", "conv2", "conv3"}, {"conv3", "add", "fc"}}) ==
        "strategy.stages[1] names layer 'conv3', which strategy.stages[0] holds already; put every layer in "
        "exactly one stage");
  CHECK(refusal(r, {{"conv1", "conv2", "conv3"}, {"add", "fc", "conv9"}}) ==
        "strategy.stages[1] names layer 'conv9', which the model does not have");
  CHECK(
      refusal(r, {{"conv1", "conv3"}, {"conv2", "add", "fc"}}) ==
      "strategy.stages: layer 'conv3' (stage 0) reads 'conv2' of the later stage 1; the stages run in order");
  CHECK(
      refusal(r, {{"conv2"}, {"conv1", "conv3", "add", "fc"}}) ==
      "strategy.stages: layer 'conv1' (stage 1) reads the network's input, which only stage 0 receives; move "
      "it to stage 0");
  CHECK(refusal(chain({1, 1}), {{}, {"l0", "l1"}}) ==
        "strategy.stages[0] lists no layers; give every stage at least one");
  CHECK(refusal(chain({1, 1, 1}), {{"l0", "l2"}, {"l1"}}) ==
        "strategy.stages: layer 'l2' (stage 0) reads 'l1' of the later stage 1; the stages run in order");
}

TEST_CASE("pipeline split: the automatic split balances the stages' time") {
  CHECK(balancedStages(chain({1, 1, 1, 1, 1, 1}), 3, 0.0).stage_of == std::vector<int>{0, 0, 1, 1, 2, 2});
  CHECK(balancedStages(chain({4, 1, 1, 1, 1}), 2, 0.0).stage_of == std::vector<int>{0, 1, 1, 1, 1});
  // Copies are charged, to both sides of a cut: one where little crosses
  // wins over an even split of the compute. Cutting after l1 would nearly
  // balance the compute (2 | 2.5), but its output is dear to copy (2 x 1000 x
  // 0.001 s on each side): 4 | 4.5; cutting after l2 gives 3.02 | 1.52, after
  // l0 1.02 | 3.52.
  std::vector<LayerCost> wide = chain({1, 1, 1, 1.5});
  wide[1].out_floats = 1000;
  const StagePlan p = balancedStages(wide, 2, 0.001);
  CHECK(p.stage_of == std::vector<int>{0, 0, 0, 1});
  CHECK(p.cut_floats == std::vector<int64_t>{10});
  CHECK(p.compute_seconds == std::vector<double>{3, 1.5});
  CHECK(balancedStages(chain({1, 1}), 2, 0.0).stage_of == std::vector<int>{0, 1});
  try {
    balancedStages(chain({1, 1}), 3, 0.0);
    FAIL("3 stages of 2 layers were accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) ==
          "strategy.stages = 3 for a model of 2 layers: give each stage at least one layer");
  }
}

TEST_CASE("pipeline split: the automatic split's slowest stage is the best of every contiguous split") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> seconds(0.1, 5.0);
  std::uniform_int_distribution<int> floats(1, 400);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + trial % 7, stages = 1 + trial % std::min(n, 4);
    std::vector<LayerCost> layers;
    for (int i = 0; i < n; ++i) {
      LayerCost l{"l" + std::to_string(i), {i - 1}, seconds(rng), floats(rng)};
      if (i >= 3 && trial % 2) l.inputs.push_back(i - 3);  // a skip connection over two layers
      layers.push_back(l);
    }
    const double spf = trial % 3 == 0 ? 0.0 : 0.002;
    CAPTURE(trial);
    const StagePlan plan = balancedStages(layers, stages, spf);
    // Brute force: every choice of stages - 1 cuts among the n - 1 gaps.
    double brute = std::numeric_limits<double>::infinity();
    for (int mask = 0; mask < (1 << (n - 1)); ++mask) {
      if (__builtin_popcount(static_cast<unsigned>(mask)) != stages - 1) continue;
      std::vector<int> stage_of(static_cast<size_t>(n), 0);
      for (int i = 1; i < n; ++i)
        stage_of[static_cast<size_t>(i)] = stage_of[static_cast<size_t>(i) - 1] + ((mask >> (i - 1)) & 1);
      brute = std::min(brute, slowest(layers, stage_of, spf));
    }
    CHECK(slowest(layers, plan.stage_of, spf) == doctest::Approx(brute).epsilon(1e-12));
  }
}

namespace {

// 1f1b over 2 stages: stage 0 holds 2 micro-batches' activations, stage 1 one.
StageMemory oneFOneB(int64_t limit_bytes = 0) { return StageMemory{{2, 1}, 12.0, limit_bytes}; }

// A chain of equal times whose layers hold `held` floats each.
std::vector<LayerCost> holding(const std::vector<int64_t>& held, const std::vector<double>& seconds) {
  std::vector<LayerCost> layers = chain(seconds);
  for (size_t i = 0; i < layers.size(); ++i) layers[i].held_floats = held[i];
  return layers;
}

}  // namespace

TEST_CASE("pipeline split: a stage's memory counts its activations times the micro-batches it holds") {
  std::vector<LayerCost> layers = holding({100, 100, 100, 100}, {1, 1, 1, 1});
  layers[0].param_floats = 10;
  const StagePlan p = balancedStages(layers, 2, 0.0, oneFOneB());
  REQUIRE(p.stage_of == std::vector<int>{0, 0, 1, 1});
  // Stage 0: 200 floats x 4 bytes x 2 in flight + 10 parameters x 12 bytes; stage 1: 200 x 4 x 1.
  CHECK(p.memory_bytes == std::vector<int64_t>{1720, 800});
}

TEST_CASE("pipeline split: among splits as fast within the slack, the one needing least memory") {
  // Cutting after l1 is fastest (1.01 | 1.01), after l0 within 2% of it (1 | 1.02). With 1f1b
  // stage 0 holds two micro-batches: after l1 it needs 2 x 1100 x 4 = 8800 bytes, after l0 the
  // largest stage needs 4800 (stage 1, 1200 x 4).
  const std::vector<LayerCost> layers = holding({100, 1000, 100, 100}, {1, 0.01, 1, 0.01});
  CHECK(balancedStages(layers, 2, 0.0, oneFOneB()).stage_of == std::vector<int>{0, 1, 1, 1});
  // Holding one micro-batch each, the fastest split also needs least (4400 against 4800).
  CHECK(balancedStages(layers, 2, 0.0, StageMemory{{1, 1}, 12.0, 0}).stage_of ==
        std::vector<int>{0, 0, 1, 1});
  // Times further apart than the slack (1.1 | 1.1 against 1 | 1.2): time wins whatever the memory.
  const std::vector<LayerCost> apart = holding({100, 1000, 100, 100}, {1, 0.1, 1, 0.1});
  CHECK(balancedStages(apart, 2, 0.0, oneFOneB()).stage_of == std::vector<int>{0, 0, 1, 1});
}

TEST_CASE("pipeline split: a memory limit moves the cut, and one no split fits is refused naming the least") {
  // Balanced time cuts after l1, but stage 0 then holds 2 x 2,000,000 floats x 4 bytes = 16 MB.
  const std::vector<LayerCost> layers = holding({1000000, 1000000, 100000, 100000}, {1, 1, 1, 1});
  CHECK(balancedStages(layers, 2, 0.0, oneFOneB()).stage_of == std::vector<int>{0, 0, 1, 1});
  const StagePlan limited = balancedStages(layers, 2, 0.0, oneFOneB(10000000));
  CHECK(limited.stage_of == std::vector<int>{0, 1, 1, 1});
  CHECK(limited.memory_bytes == std::vector<int64_t>{8000000, 4800000});
  try {
    balancedStages(layers, 2, 0.0, oneFOneB(4000000));
    FAIL("a split was accepted that needs more than the limit");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) ==
          "strategy.stage_memory_mb = 4: no split into 2 stages fits; the least any needs is 8.0 MB for its "
          "largest stage; raise the limit, use more stages or micro-batches, or a smaller batch");
  }
}
