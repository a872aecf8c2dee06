// A batch_norm whose only reader is an add of two inputs computes the sum
// itself (core/nn/residual_add_fusion.h): the model hands it the add's other
// input, and the add, and a relu after it, become aliases of its output. The
// fused model must compute what the same model unfused computes (outputs,
// parameter gradients, running statistics, the gradient reaching the
// residual's producer), and its gradients must match finite differences.
// Three residual shapes: ResNet's identity shortcut (the residual a conv2d
// that the block's first conv2d reads too), its projection shortcut (two
// batch_norms: the later one computes the sum), and the network input as the
// residual (no gradient for it).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/nn/layer_registry.h"
#include "core/nn/layers/batch_norm.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"
#include "nn_test_util.h"
#include "tests/common/layer_spec.h"
#include "tests/common/param_gradcheck.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

LayerSpec spec(const std::string& name, const std::string& type, std::vector<std::string> inputs,
               std::initializer_list<std::pair<std::string, LayerOptions::Value>> options = {}) {
  return testing::layerSpec(name, type, std::move(inputs), options);
}

LayerSpec conv(const std::string& name, const std::string& input, int64_t filters = 3) {
  return spec(name, "conv2d", {input},
              {{"filters", filters}, {"kernel", int64_t{3}}, {"padding", int64_t{1}}});
}

LayerSpec bn(const std::string& name, const std::string& input) { return spec(name, "batch_norm", {input}); }

LayerSpec head() { return spec("fc", "dense", {"flat"}, {{"units", int64_t{4}}}); }

// stem -> c1 -> bn1 -> add(bn1, stem) -> relu -> flatten -> fc.
std::vector<LayerSpec> identityBlock() {
  return {conv("stem", "input"),
          conv("c1", "stem"),
          bn("bn1", "c1"),
          spec("sum", "add", {"bn1", "stem"}),
          spec("act", "relu", {"sum"}),
          spec("flat", "flatten", {"act"}),
          head()};
}

// stem -> (ca -> bn_a), (cb -> bn_b) -> add(bn_a, bn_b) -> relu -> flatten -> fc.
std::vector<LayerSpec> projectionBlock() {
  return {conv("stem", "input"),
          conv("ca", "stem"),
          bn("bn_a", "ca"),
          conv("cb", "stem"),
          bn("bn_b", "cb"),
          spec("sum", "add", {"bn_a", "bn_b"}),
          spec("act", "relu", {"sum"}),
          spec("flat", "flatten", {"act"}),
          head()};
}

// c1 -> bn1 -> add(input, bn1) -> flatten -> fc: no activation, the network input as the residual.
std::vector<LayerSpec> inputResidual() {
  return {conv("c1", "input", 2), bn("bn1", "c1"), spec("sum", "add", {"input", "bn1"}),
          spec("flat", "flatten", {"sum"}), head()};
}

struct Net {
  std::vector<LayerSpec> specs;
  std::string fused_into;  // the batch_norm that computes the sum
};

std::vector<Net> nets() {
  return {{identityBlock(), "bn1"}, {projectionBlock(), "bn_b"}, {inputResidual(), "bn1"}};
}

const Shape kInput{2, 4, 4};
constexpr int64_t kBatch = 3;

int nodeOf(const Model& m, const std::string& name) {
  for (size_t i = 0; i < m.nodes().size(); ++i)
    if (m.nodes()[i].layer->name() == name) return static_cast<int>(i);
  return -1;
}

// A model with its parameters (seeded), gradients and buffers.
struct Bound {
  Model model;
  ParamStore store, buffers;
  Tensor grads;
  Bound(const std::vector<LayerSpec>& specs, ModelFusions fusions)
      : model(specs, kInput, builtinLayers(), LayerDefaults{}, fusions) {
    model.registerParams(store);
    store.allocate();
    store.initialize(11);
    model.registerBuffers(buffers);
    buffers.allocate();
    buffers.initialize(0);
    grads = store.gradBuffer();
    model.bind(store, grads, kBatch, &buffers);
  }
};

double maxAbsDiff(const Tensor& a, const Tensor& b) {
  double d = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, std::fabs(double(a.data()[i]) - b.data()[i]));
  return d;
}

}  // namespace

TEST_CASE("a batch_norm read only by an add computes the sum, and a relu after it, in the model") {
  for (const Net& net : nets()) {
    CAPTURE(net.fused_into);
    Bound fused(net.specs, ModelFusions{});
    const Model& m = fused.model;
    const int producer = nodeOf(m, net.fused_into);
    CHECK(m.aliasOf(nodeOf(m, "sum")) == producer);
    REQUIRE(m.nodes()[producer].inputs.size() == 2);
    const auto* layer = dynamic_cast<const BatchNorm*>(m.nodes()[producer].layer.get());
    REQUIRE(layer != nullptr);
    CHECK(layer->addsResidual());
    const bool relu = nodeOf(m, "act") >= 0;
    if (relu) CHECK(m.aliasOf(nodeOf(m, "act")) == producer);
    CHECK(layer->describe().find(relu ? "add fused, relu fused" : "add fused") != std::string::npos);
    if (!relu) CHECK(m.aliasOf(nodeOf(m, "flat")) == producer);  // a reshape of the sum

    Bound plain(net.specs, ModelFusions{false});
    CHECK(plain.model.aliasOf(nodeOf(plain.model, "sum")) == -1);
    CHECK(plain.model.nodes()[nodeOf(plain.model, net.fused_into)].inputs.size() == 1);
    // Checkpoints are unchanged: the same parameter and buffer names.
    REQUIRE(fused.store.entries().size() == plain.store.entries().size());
    for (size_t i = 0; i < fused.store.entries().size(); ++i)
      CHECK(fused.store.entries()[i].name == plain.store.entries()[i].name);
    REQUIRE(fused.buffers.entries().size() == plain.buffers.entries().size());
    for (size_t i = 0; i < fused.buffers.entries().size(); ++i)
      CHECK(fused.buffers.entries()[i].name == plain.buffers.entries()[i].name);
  }
}

TEST_CASE("a batch_norm declines the add after an activation, and an add of one node twice is not fused") {
  BatchNorm layer("bn", BatchNormConfig{});
  layer.setup({Shape{3, 2, 2}});
  REQUIRE(layer.fuseActivation("relu"));
  CHECK_FALSE(layer.fuseResidualAdd());  // relu(bn(x)) + r is not relu(bn(x) + r)
  BatchNorm twice("bn2", BatchNormConfig{});
  twice.setup({Shape{3, 2, 2}});
  CHECK(twice.fuseResidualAdd());
  CHECK_FALSE(twice.fuseResidualAdd());

  // bn1 is read twice by the add: it has two readers, so nothing fuses.
  Model m({conv("c1", "input"), bn("bn1", "c1"), spec("sum", "add", {"bn1", "bn1"}),
           spec("flat", "flatten", {"sum"}), head()},
          kInput, builtinLayers(), LayerDefaults{});
  CHECK(m.aliasOf(nodeOf(m, "sum")) == -1);
}

TEST_CASE("a model with batch_norm and add fused computes what the same model unfused computes") {
  for (const Net& net : nets()) {
    CAPTURE(net.fused_into);
    Bound fused(net.specs, ModelFusions{});
    Bound plain(net.specs, ModelFusions{false});
    REQUIRE(fused.store.size() == plain.store.size());
    Rng rng(23);
    Tensor input = Tensor::empty(kInput.withBatch(kBatch));
    rng.fill(input);
    Tensor r = Tensor::empty(Shape{kBatch, 4});
    rng.fill(r);
    // Two steps: the second starts from running statistics the first moved.
    for (int step = 0; step < 2; ++step) {
      CAPTURE(step);
      const Tensor y_fused = copyOf(fused.model.forward(input, {}));
      const Tensor y_plain = copyOf(plain.model.forward(input, {}));
      CHECK(maxAbsDiff(y_fused, y_plain) == 0.0);
      fused.model.backward(input, r, {});
      plain.model.backward(input, r, {});
      // Every parameter's gradient, the stem's included: it receives the
      // batch_norm's input gradient and the residual's.
      CHECK(maxAbsDiff(fused.grads, plain.grads) == 0.0);
      CHECK(maxAbsDiff(fused.buffers.params(), plain.buffers.params()) == 0.0);
      // Inference too (the running statistics, and the residual added).
      LayerContext inference;
      inference.training = false;
      CHECK(maxAbsDiff(fused.model.forward(input, inference), plain.model.forward(input, inference)) == 0.0);
    }
  }
}

TEST_CASE("a model with batch_norm and add fused has the parameter gradients of finite differences") {
  // As dag_model_test.cpp: central differences of L = sum(y * R), skipping
  // the few parameters with a relu kink within the step, with half its step:
  // through a batch_norm a parameter moves all of a channel's values, so
  // kinks are nearer (2-4% skipped here; the worst checked one scores about
  // 0.5). The running statistics are frozen (updates_buffers off) so that
  // every evaluation shifts its sums by the same K.
  for (const Net& net : nets()) {
    CAPTURE(net.fused_into);
    Bound b(net.specs, ModelFusions{});
    Rng rng(31);
    for (size_t i = 0; i < b.store.entries().size(); ++i) {
      Tensor value = b.store.view(b.store.params(), i);
      const InitKind init = b.store.entries()[i].spec.init;
      rng.fill(value, init == InitKind::Zeros ? 0.1f : 0.3f);
      if (init == InitKind::Ones)  // batch_norm's gamma: around 1
        for (int64_t k = 0; k < value.numel(); ++k) value.data()[k] += 1.0f;
    }
    Tensor input = Tensor::empty(kInput.withBatch(kBatch));
    rng.fill(input);
    Tensor r = Tensor::empty(Shape{kBatch, 4});
    rng.fill(r);
    LayerContext ctx;
    ctx.updates_buffers = false;
    auto loss = [&] { return dotLoss(b.model.forward(input, ctx), r); };
    b.model.forward(input, ctx);
    b.model.backward(input, r, ctx);
    const Tensor analytic = copyOf(b.grads);

    const testing::ParamGradcheck fd =
        testing::checkParamGradients(b.store, analytic, loss, 1e-3f, 2e-3, 2e-3);
    INFO("worst: " << fd.where << "; checked " << fd.checked << ", skipped " << fd.skipped);
    CHECK(fd.worst <= 1.0);
    CHECK(fd.checked + fd.skipped == b.store.count());
    CHECK(fd.skipped * 20 <= fd.checked + fd.skipped);
  }
}
