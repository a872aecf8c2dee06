// A backward split in two (BackwardPart::Inputs, then Params, as a pipeline
// stage's drain runs it) adds up to one whole backward, bit for bit: the
// input gradients from the first call with no parameter gradient, the
// parameter gradients from the second with no input gradient; for every
// CPU convolution algorithm that splits and the dense layer, with and
// without a fused relu and on each product path; and a residual model's
// two passes, whose listener hears each layer once, when its parameter
// gradients are complete.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>

#include "core/nn/layer_registry.h"
#include "core/nn/layers/conv2d.h"
#include "core/nn/layers/dense.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"
#include "nn_test_util.h"
#include "tests/common/conv_config.h"
#include "tests/common/residual_dag.h"

using namespace dtrain;
using namespace dtrain::test;
using dtrain::testing::convConfig;

namespace {

bool allZero(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.data()[i] != 0.0f) return false;
  return true;
}

struct Case {
  const char* what;
  std::function<std::unique_ptr<Layer>()> make;
  Shape in;
};

Case conv(const char* what, Conv2dConfig c, Shape in) {
  return {what, [c] { return std::make_unique<Conv2d>("c", c); }, in};
}

}  // namespace

TEST_CASE("a backward split into input and parameter gradients equals one whole backward") {
  Conv2dConfig grouped = convConfig(6, 3, 3, 1, 1, 1, 1, ConvAlgo::Im2col);
  grouped.groups = 2;
  const Case cases[] = {
      conv("im2col 3x3 stride 2", convConfig(5, 3, 3, 2, 2, 1, 1, ConvAlgo::Im2col), Shape{3, 9, 8}),
      conv("im2col, 140 channels (packed products)", convConfig(7, 3, 3, 1, 1, 1, 1, ConvAlgo::Im2col),
           Shape{140, 4, 4}),
      conv("winograd 2x2", convConfig(5, 3, 3, 1, 1, 1, 1, ConvAlgo::Winograd2x2), Shape{4, 7, 6}),
      conv("winograd 4x4", convConfig(5, 3, 3, 1, 1, 1, 1, ConvAlgo::Winograd4x4), Shape{4, 12, 12}),
      conv("pointwise", convConfig(9, 1, 1, 1, 1, 0, 0, ConvAlgo::Pointwise), Shape{6, 5, 7}),
      conv("pointwise, 40 channels", convConfig(9, 1, 1, 1, 1, 0, 0, ConvAlgo::Pointwise), Shape{40, 5, 7}),
      conv("grouped", grouped, Shape{4, 6, 6}),
      {"dense",
       [] {
         return std::make_unique<Dense>("d", DenseConfig{7, true, InitKind::HeNormal});
       },
       Shape{12}},
  };
  for (const Case& k : cases) {
    for (bool relu : {false, true}) {
      CAPTURE(k.what);
      CAPTURE(relu);
      Rng rng(17);
      Harness h(k.make(), k.in, 5, rng);
      REQUIRE(h.layer->splitsBackward());
      if (relu) REQUIRE(h.layer->fuseActivation("relu"));
      h.forward();
      h.backward();
      const Tensor dx_whole = copyOf(h.dx);
      std::vector<Tensor> grads_whole;
      for (const Tensor& g : h.grads) grads_whole.push_back(copyOf(g));

      h.zeroGrads();
      h.dx.fill(1e9f);
      LayerContext inputs;
      inputs.backward_part = BackwardPart::Inputs;
      h.backward(inputs);
      CHECK(maxRelDiff(h.dx, dx_whole) == 0.0);
      for (const Tensor& g : h.grads) CHECK(allZero(g));

      h.dx.fill(3.0f);
      LayerContext params;
      params.backward_part = BackwardPart::Params;
      h.backward(params, /*want_dx=*/false);
      for (size_t i = 0; i < grads_whole.size(); ++i) CHECK(maxRelDiff(h.grads[i], grads_whole[i]) == 0.0);
      CHECK(h.dx.data()[0] == 3.0f);  // no input gradient in the second call
    }
  }
}

TEST_CASE("the depthwise kernel, which computes both gradients at once, does not split") {
  Conv2dConfig c = convConfig(4, 3, 3, 1, 1, 1, 1, ConvAlgo::Depthwise);
  c.groups = 4;
  Conv2d layer("c", c);
  layer.setup({Shape{4, 6, 6}});
  CHECK_FALSE(layer.splitsBackward());
}

namespace {

struct HeardLayers : BackwardListener {
  std::vector<int> heard;
  void layerDone(int node) override { heard.push_back(node); }
};

}  // namespace

TEST_CASE("a model's backward in two passes equals one pass, and tells each layer done once") {
  const Shape input_shape{2, 5, 5};
  const int64_t batch = 3;
  Model model(testing::residualDag(), input_shape, builtinLayers(), LayerDefaults{});
  ParamStore store;
  model.registerParams(store);
  store.allocate();
  Rng rng(5);
  fillParams(store, rng, 0.15f);
  Tensor grads = store.gradBuffer();
  model.bind(store, grads, batch);
  Tensor input = Tensor::empty(input_shape.withBatch(batch));
  rng.fill(input);
  Tensor dy = Tensor::empty(Shape{batch, 4});
  rng.fill(dy);

  HeardLayers whole_heard;
  LayerContext ctx;
  ctx.backward_listener = &whole_heard;
  model.forward(input, ctx);
  model.backward(input, dy, ctx);
  const Tensor whole = copyOf(grads);

  grads.zero();
  HeardLayers split_heard;
  ctx.backward_listener = &split_heard;
  ctx.backward_part = BackwardPart::Inputs;
  model.backward(input, dy, ctx);
  const size_t heard_after_inputs = split_heard.heard.size();
  ctx.backward_part = BackwardPart::Params;
  model.backward(input, dy, ctx);
  CHECK(maxRelDiff(grads, whole) == 0.0);
  // The convolutions and the dense layer are heard in the second pass only.
  CHECK(heard_after_inputs < split_heard.heard.size());
  std::vector<int> a = whole_heard.heard, b = split_heard.heard;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  CHECK(a == b);
}
