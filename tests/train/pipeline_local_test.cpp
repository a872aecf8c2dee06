// A pipeline run in one process (LocalPipeline) against the unpipelined
// model: gpipe and 1f1b, 2 to 4 stages split automatically, micro-batches
// 1, N - 1 (gpipe), N, 2N and a last one smaller than the others; the mlp
// with dropout, the cnn and a residual DAG whose skip connections cross the
// cuts. After 3 steps of SGD with momentum every weight equals the
// unpipelined run's within 1e-5, and so does every step's loss.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/ops.h"
#include "core/nn/layer_registry.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"
#include "core/optim/optimizer.h"
#include "models/model_builder.h"
#include "strategies/pipeline/local_pipeline.h"
#include "strategies/pipeline/schedule.h"
#include "strategies/pipeline/stage_split.h"
#include "tests/common/residual_dag.h"
#include "tests/nn/nn_test_util.h"

using namespace dtrain;
using namespace dtrain::pipeline;
using dtrain::test::Rng;

namespace {

constexpr int kSteps = 3;
constexpr int64_t kBatch = 10;  // 3 micro-batches: 3, 3 and 4 rows

struct ModelCase {
  std::string name;
  std::vector<LayerSpec> specs;
  Shape input;
  int64_t classes;
};

std::vector<ModelCase> models() {
  ModelSection mlp;
  mlp.preset = "mlp";
  mlp.hidden = {16, 12, 8};
  mlp.dropout = 0.2;
  ModelSection cnn;
  cnn.preset = "cnn";
  return {{"mlp", modelLayerSpecs(mlp, 4), Shape{1, 6, 6}, 4},
          {"cnn", modelLayerSpecs(cnn, 4), Shape{1, 8, 8}, 4},
          {"residual", testing::residualDag(), Shape{2, 5, 5}, 4}};
}

std::unique_ptr<Optimizer> sgd() {
  OptimizerSection o;
  o.type = "sgd";
  o.lr = 0.05;
  o.momentum = 0.9;
  return makeOptimizer(o);
}

Batch randomBatch(const Shape& input, int64_t classes, Rng& rng) {
  Batch b;
  b.images = Tensor::empty(input.withBatch(kBatch));
  rng.fill(b.images);
  for (int64_t i = 0; i < kBatch; ++i) b.labels.push_back(static_cast<int32_t>(rng.engine()() % classes));
  b.size = kBatch;
  b.global_size = kBatch;
  return b;
}

double relativeDifference(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 1e-12;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(a[i])));
  }
  return diff / scale;
}

void checkPipeline(const ModelCase& mc, const ScheduleConfig& config) {
  Model whole(mc.specs, mc.input, builtinLayers(), LayerDefaults{});
  ParamStore store;
  whole.registerParams(store);
  store.allocate();
  store.initialize(5);
  Tensor grads = store.gradBuffer();
  whole.bind(store, grads, kBatch);

  const StagePlan plan = balancedStages(layerCosts(whole, mc.specs), config.stages, 0.0);
  LocalPipeline pipe(whole, mc.specs, plan.stage_of, compileSchedule(config), kBatch, mc.classes,
                     builtinLayers(), LayerDefaults{});
  std::vector<std::unique_ptr<Optimizer>> stage_opt;
  for (int s = 0; s < pipe.stages(); ++s) {
    ParamStore& mine = pipe.params(s);
    for (const ParamEntry& e : mine.entries()) {
      const ParamEntry* from = store.find(e.name);
      REQUIRE(from != nullptr);
      std::copy_n(store.params().data() + from->offset, e.shape.numel(), mine.params().data() + e.offset);
    }
    stage_opt.push_back(sgd());
    stage_opt.back()->init(mine.size());
  }
  std::unique_ptr<Optimizer> whole_opt = sgd();
  whole_opt->init(store.size());

  Rng rng(23);
  Tensor dlogits = Tensor::empty(Shape{kBatch, mc.classes});
  for (int step = 1; step <= kSteps; ++step) {
    CAPTURE(step);
    const Batch batch = randomBatch(mc.input, mc.classes, rng);
    const uint64_t seed = 1000 + step;
    const float scale = 1.0f / kBatch;
    // Unpipelined.
    grads.zero();
    LayerContext ctx;
    ctx.seed = seed;
    const Tensor& logits = whole.forward(batch.images, ctx);
    int64_t correct = 0;
    const double loss = ops::softmaxCrossEntropy(logits.data(), batch.labels.data(), kBatch, mc.classes,
                                                 scale, dlogits.data(), &correct);
    whole.backward(batch.images, dlogits, ctx);
    whole_opt->update(store.params().data(), grads.data(), 0, store.size(), StepInfo{0.05, step});
    // Pipelined.
    for (int s = 0; s < pipe.stages(); ++s) pipe.grads(s).zero();
    const BatchFigures f = pipe.step(batch, seed, scale);
    CHECK(f.samples == kBatch);
    CHECK(f.correct == correct);
    CHECK(f.loss_sum == doctest::Approx(loss).epsilon(1e-5));
    for (int s = 0; s < pipe.stages(); ++s)
      stage_opt[static_cast<size_t>(s)]->update(pipe.params(s).params().data(), pipe.grads(s).data(), 0,
                                                pipe.params(s).size(), StepInfo{0.05, step});
  }
  for (int s = 0; s < pipe.stages(); ++s)
    for (const ParamEntry& e : pipe.params(s).entries()) {
      CAPTURE(e.name);
      const ParamEntry* from = store.find(e.name);
      CHECK(relativeDifference(store.params().data() + from->offset,
                               pipe.params(s).params().data() + e.offset, e.shape.numel()) <= 1e-5);
    }
}

}  // namespace

TEST_CASE("pipeline in one process: gpipe and 1f1b end where the unpipelined model does") {
  for (const ModelCase& mc : models())
    for (const std::string kind : {"gpipe", "1f1b"})
      for (int stages : {2, 3, 4})
        for (int micro : {1, stages - 1, stages, 2 * stages, 3}) {
          if (micro < 1 || (kind == "1f1b" && micro < stages)) continue;
          CAPTURE(mc.name);
          CAPTURE(kind);
          CAPTURE(stages);
          CAPTURE(micro);
          checkPipeline(mc, ScheduleConfig{stages, micro, kind, 1});
        }
}
