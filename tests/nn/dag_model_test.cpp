// A residual DAG built from layer specs, its parameter gradients from
// Model::backward against finite differences of the whole model's loss. This
// covers what no single layer's check can: the model's sum of the gradients
// of a node read by several layers, through one scratch buffer per input slot
// (an add whose inputs are both read elsewhere too), an add of three inputs,
// and a relu fused into the conv2d before it.
//
// The network is piecewise linear (conv2d, relu, add, dense), so along one
// parameter the loss is linear between kinks, where some relu's input crosses
// zero. Central differences are exact away from kinks; near one they are not,
// and the kink shows as a difference between the two one-sided slopes. Such
// parameters are skipped (a kink within the step moves the central difference
// by at most half the gap between the slopes, so a gap within the tolerance is
// harmless), and only a few may be: with a step of 2e-3, 4 of 709 here. A
// wrong gradient leaves the slopes equal and is caught. Tolerances as in
// gradcheck_test.cpp; the worst parameter scores about 0.25 of it.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/nn/layer_registry.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"
#include "nn_test_util.h"
#include "tests/common/layer_spec.h"
#include "tests/common/param_gradcheck.h"
#include "tests/common/residual_dag.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

LayerSpec spec(const std::string& name, const std::string& type, std::vector<std::string> inputs,
               std::initializer_list<std::pair<std::string, LayerOptions::Value>> options = {}) {
  return testing::layerSpec(name, type, std::move(inputs), options);
}

LayerSpec conv(const std::string& name, const std::string& input) { return testing::dagConv(name, input); }

int nodeOf(const Model& m, const std::string& name) {
  for (size_t i = 0; i < m.nodes().size(); ++i)
    if (m.nodes()[i].layer->name() == name) return static_cast<int>(i);
  return -1;
}

}  // namespace

TEST_CASE("a residual DAG's parameter gradients match finite differences of the model's loss") {
  const Shape input_shape{2, 5, 5};
  const int64_t batch = 2;
  Model model(testing::residualDag(), input_shape, builtinLayers(), LayerDefaults{});
  REQUIRE(model.outputShape() == Shape{4});
  // The graph is what the test means to exercise.
  CHECK(model.aliasOf(nodeOf(model, "r1")) == nodeOf(model, "c1"));      // fused: c1 has no other reader
  CHECK(model.aliasOf(nodeOf(model, "act1")) == nodeOf(model, "sum1"));  // fused into the add: its
                                                                         // result is read by 3 layers
  CHECK(model.nodes()[nodeOf(model, "sum3")].inputs.size() == 3);

  ParamStore store;
  model.registerParams(store);
  store.allocate();
  // Small random parameters (weights 0.15, biases 0.1): He's would let the
  // residual sums grow the outputs to ~20, where float round-off in the loss
  // approaches the tolerance.
  Rng rng(61);
  for (size_t i = 0; i < store.entries().size(); ++i) {
    Tensor value = store.view(store.params(), i);
    rng.fill(value, store.entries()[i].spec.init == InitKind::Zeros ? 0.1f : 0.15f);
  }
  Tensor grads = store.gradBuffer();
  model.bind(store, grads, batch);

  Tensor input = Tensor::empty(input_shape.withBatch(batch));
  rng.fill(input);
  Tensor r = Tensor::empty(Shape{batch, 4});
  rng.fill(r);
  LayerContext ctx;
  auto loss = [&] { return dotLoss(model.forward(input, ctx), r); };  // L = sum(y * R)

  model.forward(input, ctx);
  model.backward(input, r, ctx);  // dL/dy = R
  Tensor analytic = Tensor::empty(grads.shape());
  analytic.copyFrom(grads);

  const testing::ParamGradcheck g = testing::checkParamGradients(store, analytic, loss, 2e-3f, 2e-3, 2e-3);
  INFO("worst: " << g.where << "; checked " << g.checked << ", skipped " << g.skipped);
  CHECK(g.worst <= 1.0);
  CHECK(g.checked + g.skipped == store.count());   // every parameter
  CHECK(g.skipped * 20 <= g.checked + g.skipped);  // at most 5% near a kink
}

TEST_CASE("a node read twice by one add gets both gradients") {
  // sum = c1 + c1: the second slot's gradient goes through scratch and is
  // added, so c1's output gradient is twice the add's.
  const Shape input_shape{1, 3, 3};
  Model model({conv("c1", "input"), spec("sum", "add", {"c1", "c1"}), spec("flat", "flatten", {"sum"}),
               spec("fc", "dense", {"flat"}, {{"units", int64_t{2}}})},
              input_shape, builtinLayers(), LayerDefaults{});
  ParamStore store;
  model.registerParams(store);
  store.allocate();
  store.initialize(3);
  Tensor grads = store.gradBuffer();
  model.bind(store, grads, 1);
  Rng rng(5);
  Tensor input = Tensor::empty(input_shape.withBatch(1));
  rng.fill(input);
  Tensor r = Tensor::empty(Shape{1, 2});
  rng.fill(r);
  model.forward(input, {});
  model.backward(input, r, {});
  const ParamEntry* bias = store.find("c1.bias");
  REQUIRE(bias != nullptr);
  const ParamEntry* w = store.find("fc.weight");
  REQUIRE(w != nullptr);
  // dL/db_c1[ch] = 2 * sum over the channel's 9 outputs of sum_j R_j W[j, ch*9 + i].
  for (int64_t ch = 0; ch < 3; ++ch) {
    double want = 0.0;
    for (int64_t i = 0; i < 9; ++i)
      for (int64_t j = 0; j < 2; ++j)
        want += 2.0 * r.data()[j] * store.params().data()[w->offset + j * 27 + ch * 9 + i];
    CAPTURE(ch);
    CHECK(grads.data()[bias->offset + ch] == doctest::Approx(want).epsilon(1e-5));
  }
}
