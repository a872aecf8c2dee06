// The layer contract: parameter gradients accumulate while input gradients
// are overwritten; a null input gradient still yields parameter gradients;
// shapes, parameter specs, FLOP counts and descriptions; shape errors.
#include <doctest/doctest.h>

#include "core/errors.h"
#include "core/nn/layers/avg_pool.h"
#include "core/nn/layers/conv2d.h"
#include "core/nn/layers/dense.h"
#include "core/nn/layers/dropout.h"
#include "core/nn/layers/flatten.h"
#include "core/nn/layers/max_pool.h"
#include "core/nn/layers/relu.h"
#include "nn_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

Conv2dConfig conv3x3(int64_t filters, int64_t pad, ConvAlgo algo) {
  Conv2dConfig c;
  c.filters = filters;
  c.pad_h = c.pad_w = pad;
  c.algo = algo;
  return c;
}

std::string shapeError(Layer& layer, const std::vector<Shape>& inputs) {
  try {
    layer.setup(inputs);
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("parameter gradients accumulate, input gradients are overwritten") {
  struct Case {
    std::function<std::unique_ptr<Layer>()> make;
    Shape in;
  };
  const Case cases[] = {
      {[] { return std::unique_ptr<Layer>(new Conv2d("c", conv3x3(4, 1, ConvAlgo::Winograd2x2))); },
       Shape{3, 7, 6}},
      {[] { return std::unique_ptr<Layer>(new Conv2d("c", conv3x3(4, 1, ConvAlgo::Im2col))); },
       Shape{3, 7, 6}},
      {[] {
         return std::unique_ptr<Layer>(new Dense("d", DenseConfig{5, true, InitKind::HeNormal}));
       },
       Shape{8}},
      {[] { return std::unique_ptr<Layer>(new MaxPool("m", PoolConfig{})); }, Shape{2, 6, 6}},
      {[] {
         return std::unique_ptr<Layer>(new AvgPool("a", PoolConfig{3, 3, 2, 2, 1, 1}));
       },
       Shape{2, 6, 6}},
      {[] { return std::unique_ptr<Layer>(new Relu("r")); }, Shape{2, 6, 6}},
      {[] { return std::unique_ptr<Layer>(new Flatten("f")); }, Shape{2, 6, 6}},
      {[] { return std::unique_ptr<Layer>(new Dropout("d", 0.5)); }, Shape{20}},
  };
  for (const Case& k : cases) {
    Rng rng(51);
    Harness h(k.make(), k.in, 3, rng);
    CAPTURE(h.layer->type());
    h.forward();
    h.backward();
    std::vector<Tensor> once;
    for (const Tensor& g : h.grads) {
      once.push_back(Tensor::empty(g.shape()));
      once.back().copyFrom(g);
    }
    Tensor dx_once = Tensor::empty(h.dx.shape());
    dx_once.copyFrom(h.dx);
    h.dx.fill(1e9f);  // stale contents must not leak into the result
    h.backward();
    CHECK(maxRelDiff(h.dx, dx_once) == 0.0);
    for (size_t i = 0; i < once.size(); ++i) {
      Tensor twice = Tensor::empty(once[i].shape());
      for (int64_t j = 0; j < twice.numel(); ++j) twice.data()[j] = 2.0f * once[i].data()[j];
      CHECK(maxRelDiff(h.grads[i], twice) < 1e-6);
    }
    // Without an input gradient (the first layer), parameter gradients are the same.
    h.zeroGrads();
    h.backward({}, false);
    for (size_t i = 0; i < once.size(); ++i) CHECK(maxRelDiff(h.grads[i], once[i]) < 1e-6);
  }
}

TEST_CASE("shapes, parameter specs, flops and descriptions") {
  Conv2dConfig c;
  c.filters = 32;
  c.pad_h = c.pad_w = 1;
  Conv2d conv("conv1", c);
  CHECK(conv.setup({Shape{1, 28, 28}}) == Shape{32, 28, 28});
  auto specs = conv.paramSpecs();
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].name == "weight");
  CHECK(specs[0].shape == Shape{32, 1, 3, 3});
  CHECK(specs[0].init == InitKind::HeNormal);
  CHECK(specs[0].fan_in == 9);
  CHECK(specs[0].fan_out == 32 * 9);
  CHECK(specs[1].name == "bias");
  CHECK(specs[1].shape == Shape{32});
  CHECK(specs[1].init == InitKind::Zeros);
  CHECK(conv.forwardFlops() == 2 * 32 * 28 * 28 * 9 + 32 * 28 * 28);
  CHECK(conv.describe() == "3x3 s1 p1, 32 filters");

  Conv2dConfig c2;
  c2.filters = 8;
  c2.kernel_h = 5;
  c2.kernel_w = 3;
  c2.stride_h = 2;
  c2.pad_w = 1;
  c2.bias = false;
  c2.init = InitKind::GlorotUniform;
  Conv2d conv2("c2", c2);
  CHECK(conv2.setup({Shape{3, 11, 10}}) == Shape{8, 4, 10});
  CHECK(conv2.paramSpecs().size() == 1);
  CHECK(conv2.paramSpecs()[0].init == InitKind::GlorotUniform);
  CHECK(conv2.describe() == "5x3 s2x1 p0x1, 8 filters, no bias");

  Dense fc("fc1", DenseConfig{128, true, InitKind::GlorotUniform});
  CHECK(fc.setup({Shape{3136}}) == Shape{128});
  specs = fc.paramSpecs();
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].shape == Shape{128, 3136});
  CHECK(specs[0].init == InitKind::GlorotUniform);
  CHECK(specs[0].fan_in == 3136);
  CHECK(specs[0].fan_out == 128);
  CHECK(fc.forwardFlops() == 2 * 128 * 3136 + 128);
  CHECK(fc.describe() == "128 units");

  MaxPool mp("p", PoolConfig{});
  CHECK(mp.setup({Shape{32, 28, 28}}) == Shape{32, 14, 14});
  CHECK(mp.forwardFlops() == 32 * 14 * 14 * 4);
  CHECK(mp.describe() == "2x2 s2 p0");
  AvgPool ap("a", PoolConfig{3, 3, 2, 2, 1, 1});
  CHECK(ap.setup({Shape{4, 7, 7}}) == Shape{4, 4, 4});
  Flatten fl("f");
  CHECK(fl.setup({Shape{64, 7, 7}}) == Shape{3136});
  Relu r("r");
  CHECK(r.setup({Shape{5, 2}}) == Shape{5, 2});
  CHECK(r.forwardFlops() == 10);
  Dropout d("d", 0.25);
  CHECK(d.setup({Shape{7}}) == Shape{7});
  CHECK(d.describe() == "rate 0.25");
  CHECK(r.paramSpecs().empty());
}

TEST_CASE("shape errors name the layer and the expectation") {
  Dense fc("fc1", DenseConfig{10, true, InitKind::HeNormal});
  CHECK(shapeError(fc, {Shape{32, 7, 7}}) ==
        "layer 'fc1' (dense) expects a flat input or a sequence [T, C], got [32,7,7]; add a flatten layer "
        "before it");
  Conv2dConfig c;
  c.filters = 4;
  c.kernel_h = c.kernel_w = 5;
  Conv2d conv("conv1", c);
  CHECK(shapeError(conv, {Shape{1, 3, 3}}) ==
        "layer 'conv1' (conv2d): kernel 5x5 with padding 0 does not fit input [1,3,3]");
  CHECK(shapeError(conv, {Shape{784}}) ==
        "layer 'conv1' (conv2d) expects an input [channels,height,width], got [784]");
  CHECK(shapeError(conv, {Shape{1, 8, 8}, Shape{1, 8, 8}}) == "layer 'conv1' (conv2d) takes 1 input, got 2");
  MaxPool mp("pool2", PoolConfig{3, 3, 3, 3, 0, 0});
  CHECK(shapeError(mp, {Shape{8, 2, 9}}) ==
        "layer 'pool2' (max_pool): kernel 3x3 with padding 0 does not fit input [8,2,9]");
  AvgPool ap("ap", PoolConfig{});
  CHECK(shapeError(ap, {Shape{10}}) ==
        "layer 'ap' (avg_pool) expects an input [channels,height,width], got [10]");
  c.kernel_h = 3;
  c.kernel_w = 3;
  c.stride_h = 2;
  c.algo = ConvAlgo::Winograd2x2;
  Conv2d strided("s", c);
  CHECK(shapeError(strided, {Shape{1, 8, 8}}).find("Winograd") != std::string::npos);
}

TEST_CASE("invalid configurations of directly built layers throw ConfigError") {
  CHECK_THROWS_AS(Dense("d", DenseConfig{0, true, InitKind::HeNormal}), ConfigError);
  CHECK_THROWS_AS(Conv2d("c", Conv2dConfig{}), ConfigError);  // filters 0
  CHECK_THROWS_AS(MaxPool("m", PoolConfig{2, 2, 0, 2, 0, 0}), ConfigError);
  CHECK_THROWS_AS(AvgPool("a", PoolConfig{2, 2, 2, 2, 2, 0}), ConfigError);
  CHECK_THROWS_AS(Dropout("d", 1.0), ConfigError);
  CHECK_THROWS_AS(Dropout("d", -0.1), ConfigError);
}
