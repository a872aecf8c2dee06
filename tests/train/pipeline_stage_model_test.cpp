// A model cut into pipeline stages, each stage a model of its own: run
// stage by stage (each stage's inputs the results earlier stages sent, its
// output gradients those later stages sent back), the stages compute the
// whole model's output and every parameter's gradient. Every split of a
// residual DAG, the cnn preset and a batch-norm residual network into 2 and
// 3 contiguous stages, skip connections across cuts included.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/nn/layer_registry.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"
#include "models/model_builder.h"
#include "strategies/pipeline/stage_model.h"
#include "tests/common/layer_spec.h"
#include "tests/common/residual_dag.h"
#include "tests/nn/nn_test_util.h"

using namespace dtrain;
using namespace dtrain::pipeline;
using dtrain::test::Rng;

namespace {

LayerSpec spec(const std::string& name, const std::string& type, std::vector<std::string> inputs,
               std::initializer_list<std::pair<std::string, LayerOptions::Value>> options = {}) {
  return testing::layerSpec(name, type, std::move(inputs), options);
}

LayerSpec conv(const std::string& name, const std::string& input) { return testing::dagConv(name, input); }

// conv-bn-relu, then a block whose batch norm's add may be fused (within a stage).
std::vector<LayerSpec> batchNormResidual() {
  return {conv("stem", "input"),
          spec("stem_bn", "batch_norm", {"stem"}),
          spec("stem_relu", "relu", {"stem_bn"}),
          conv("a", "stem_relu"),
          spec("a_bn", "batch_norm", {"a"}),
          spec("sum", "add", {"a_bn", "stem_relu"}),
          spec("sum_relu", "relu", {"sum"}),
          spec("pool", "global_avg_pool", {"sum_relu"}),
          spec("fc", "dense", {"pool"}, {{"units", int64_t{4}}})};
}

double relativeDifference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.numel() == b.numel());
  double diff = 0, scale = 1e-12;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::fabs(double(a.data()[i]) - b.data()[i]));
    scale = std::max(scale, std::fabs(double(a.data()[i])));
  }
  return diff / scale;
}

// Runs `specs` whole and as the stages of `stage_of`; checks the output and every parameter's gradient.
void checkStages(const std::vector<LayerSpec>& specs, const Shape& input_shape,
                 const std::vector<int>& stage_of) {
  const int64_t batch = 3;
  Model whole(specs, input_shape, builtinLayers(), LayerDefaults{});
  ParamStore store;
  whole.registerParams(store);
  store.allocate();
  Rng rng(17);
  fillParams(store, rng, 0.2f);
  ParamStore buffers;
  whole.registerBuffers(buffers);
  buffers.allocate();
  buffers.initialize(1);
  Tensor grads = store.gradBuffer();
  whole.bind(store, grads, batch, &buffers);
  Tensor input = Tensor::empty(input_shape.withBatch(batch));
  rng.fill(input);
  const Tensor& y = whole.forward(input, {});
  Tensor r = Tensor::empty(y.shape());
  rng.fill(r);
  whole.backward(input, r, {});

  const int stages = *std::max_element(stage_of.begin(), stage_of.end()) + 1;
  struct Stage {
    StagePart part;
    std::unique_ptr<Model> model;
    ParamStore store, buffers;
    Tensor grads;
  };
  std::vector<Stage> parts(static_cast<size_t>(stages));
  std::map<std::string, const Tensor*> sent;  // results out, by layer name
  for (int k = 0; k < stages; ++k) {
    Stage& s = parts[static_cast<size_t>(k)];
    s.part = stagePart(whole, specs, stage_of, k);
    s.model = std::make_unique<Model>(s.part.specs, s.part.cut, builtinLayers(), LayerDefaults{});
    s.model->registerParams(s.store);
    s.store.allocate();
    for (const ParamEntry& e : s.store.entries()) {
      const ParamEntry* from = store.find(e.name);
      REQUIRE(from != nullptr);
      std::copy_n(store.params().data() + from->offset, e.shape.numel(), s.store.params().data() + e.offset);
    }
    s.model->registerBuffers(s.buffers);
    s.buffers.allocate();
    s.buffers.initialize(1);
    s.grads = s.store.gradBuffer();
    s.model->bind(s.store, s.grads, batch, &s.buffers);
    std::vector<const Tensor*> in;
    for (const ModelCut::Input& c : s.part.cut.inputs) {
      REQUIRE((c.name == "input" || sent.count(c.name)));
      in.push_back(c.name == "input" ? &input : sent.at(c.name));
    }
    s.model->forward(in, {});
    std::vector<std::string> out_names = s.part.cut.outputs;
    out_names.push_back(s.part.specs.back().name);
    const std::vector<const Tensor*> out = s.model->outputs();
    for (size_t j = 0; j < out.size(); ++j) sent[out_names[j]] = out[j];
  }
  CHECK(relativeDifference(y, *sent.at(specs.back().name)) <= 1e-6);

  // Backward, last stage first: each result's gradient is what the later stages sent back for it, summed.
  std::map<std::string, Tensor> returned;
  for (int k = stages - 1; k >= 0; --k) {
    Stage& s = parts[static_cast<size_t>(k)];
    std::vector<std::string> out_names = s.part.cut.outputs;
    out_names.push_back(s.part.specs.back().name);
    std::vector<const Tensor*> douts;
    for (const std::string& name : out_names) {
      if (k == stages - 1 && name == out_names.back()) {
        douts.push_back(&r);
        continue;
      }
      REQUIRE(returned.count(name));
      douts.push_back(&returned.at(name));
    }
    std::vector<const Tensor*> in;
    std::vector<Tensor> dins;
    for (const ModelCut::Input& c : s.part.cut.inputs) {
      in.push_back(c.name == "input" ? &input : sent.at(c.name));
      dins.push_back(Tensor::empty(c.shape.withBatch(batch)));
    }
    std::vector<Tensor*> din_ptrs;
    for (size_t j = 0; j < dins.size(); ++j)
      din_ptrs.push_back(s.part.cut.inputs[j].needs_gradient ? &dins[j] : nullptr);
    s.model->backward(in, douts, din_ptrs, {});
    for (size_t j = 0; j < dins.size(); ++j) {
      const ModelCut::Input& c = s.part.cut.inputs[j];
      if (!c.needs_gradient) continue;
      auto [it, fresh] = returned.try_emplace(c.name, Tensor::empty(dins[j].shape()));
      if (fresh)
        it->second.copyFrom(dins[j]);
      else
        it->second.add(dins[j]);
    }
    for (const ParamEntry& e : s.store.entries()) {
      CAPTURE(e.name);
      const ParamEntry* whole_entry = store.find(e.name);
      Tensor mine = s.store.view(s.grads, static_cast<size_t>(&e - s.store.entries().data()));
      Tensor theirs = store.view(grads, static_cast<size_t>(whole_entry - store.entries().data()));
      CHECK(relativeDifference(theirs, mine) <= 1e-5);
    }
  }
}

// Every split of a model's nodes into `stages` contiguous runs.
void everySplit(const std::vector<LayerSpec>& specs, const Shape& input_shape, int stages) {
  Model whole(specs, input_shape, builtinLayers(), LayerDefaults{});
  const int n = static_cast<int>(whole.nodes().size());
  for (int mask = 0; mask < (1 << (n - 1)); ++mask) {
    if (__builtin_popcount(static_cast<unsigned>(mask)) != stages - 1) continue;
    std::vector<int> stage_of(static_cast<size_t>(n), 0);
    for (int i = 1; i < n; ++i)
      stage_of[static_cast<size_t>(i)] = stage_of[static_cast<size_t>(i) - 1] + ((mask >> (i - 1)) & 1);
    std::string cuts;
    for (int i = 1; i < n; ++i)
      if ((mask >> (i - 1)) & 1) cuts += " before " + whole.nodes()[static_cast<size_t>(i)].layer->name();
    CAPTURE(cuts);
    checkStages(specs, input_shape, stage_of);
  }
}

}  // namespace

TEST_CASE("pipeline stages: every 2- and 3-stage split of a residual DAG computes the whole model") {
  for (int stages : {2, 3}) {
    CAPTURE(stages);
    everySplit(testing::residualDag(), Shape{2, 5, 5}, stages);
  }
}

TEST_CASE("pipeline stages: every 2- and 3-stage split of the cnn preset computes the whole model") {
  ModelSection cnn;
  cnn.preset = "cnn";
  const std::vector<LayerSpec> specs = modelLayerSpecs(cnn, 10);
  for (int stages : {2, 3}) {
    CAPTURE(stages);
    everySplit(specs, Shape{1, 12, 12}, stages);
  }
}

TEST_CASE(
    "pipeline stages: every 2- and 3-stage split of a batch-norm residual network computes the whole model") {
  for (int stages : {2, 3}) {
    CAPTURE(stages);
    everySplit(batchNormResidual(), Shape{2, 6, 6}, stages);
  }
}

TEST_CASE("pipeline stages: a stage's cut names what crosses it, skip connections included") {
  const std::vector<LayerSpec> specs = testing::residualDag();
  Model whole(specs, Shape{2, 5, 5}, builtinLayers(), LayerDefaults{});
  // Stage 0: stem .. sum1 (5 layers); stage 1: act1 .. c3; stage 2: the rest.
  const std::vector<int> stage_of = {0, 0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2};
  const StagePart middle = stagePart(whole, specs, stage_of, 1);
  REQUIRE(middle.cut.inputs.size() == 1);
  CHECK(middle.cut.inputs[0].name == "sum1");
  CHECK(middle.cut.inputs[0].needs_gradient);
  CHECK(middle.cut.outputs == std::vector<std::string>{"act1"});  // sum2 and p read it after c3
  const StagePart last = stagePart(whole, specs, stage_of, 2);
  std::vector<std::string> names;
  for (const ModelCut::Input& c : last.cut.inputs) names.push_back(c.name);
  CHECK(names == std::vector<std::string>{"act1", "c3"});
  const StagePart first = stagePart(whole, specs, stage_of, 0);
  REQUIRE(first.cut.inputs.size() == 1);
  CHECK(first.cut.inputs[0].name == "input");
  CHECK_FALSE(first.cut.inputs[0].needs_gradient);
}
