// add, concat and relu6: forward values on hand-computed cases, backward
// (gradients overwritten, a null input gradient skipped), finite-difference
// gradient checks, options, and shape errors with their messages (the layers'
// own, and the Model's for a list of inputs that is too short).
//
// The gradient checks use gradcheck_test.cpp's step and tolerances: add and
// concat are linear, relu6 is piecewise linear with kinks at 0 and 6 that
// fillDistinct's inputs (spaced 0.1 apart, none within 0.05 of a kink) keep
// more than the step away from.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/nn/layer_registry.h"
#include "core/nn/layers/add.h"
#include "core/nn/layers/concat.h"
#include "core/nn/layers/relu6.h"
#include "core/nn/model.h"
#include "nn_test_util.h"
#include "tests/common/layer_spec.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

Tensor values(const Shape& shape, const std::vector<float>& v) {
  Tensor t = Tensor::empty(shape);
  REQUIRE(static_cast<int64_t>(v.size()) == t.numel());
  for (size_t i = 0; i < v.size(); ++i) t.data()[i] = v[i];
  return t;
}

std::vector<float> contents(const Tensor& t) { return std::vector<float>(t.data(), t.data() + t.numel()); }

std::string shapeError(Layer& layer, const std::vector<Shape>& inputs) {
  try {
    layer.setup(inputs);
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "(no error)";
}

void expectGradOk(Harness& h, Rng& rng) {
  GradCheckResult r = gradCheck(h, rng);
  INFO("worst: " << r.where);
  CHECK(r.checked > 0);
  CHECK(r.worst <= 1.0);
}

LayerSpec spec(const std::string& name, const std::string& type, std::vector<std::string> inputs, int line,
               std::initializer_list<std::pair<std::string, LayerOptions::Value>> options = {}) {
  return testing::layerSpec(name, type, std::move(inputs), options, SourcePos{"job.toml", line, 1},
                            SourcePos{"job.toml", line + 1, 1});
}

std::string modelError(const std::vector<LayerSpec>& specs, const Shape& input) {
  try {
    Model m(specs, input, builtinLayers(), LayerDefaults{});
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("add sums its inputs element by element, in a fixed order") {
  Add add("sum");
  CHECK(add.numInputs() == Layer::kAnyInputs);
  REQUIRE(add.setup({Shape{3}, Shape{3}, Shape{3}}) == Shape{3});
  CHECK(add.forwardFlops() == 6);
  const Tensor a = values(Shape{2, 3}, {1, -2, 3.5f, 0, 4, -1});
  const Tensor b = values(Shape{2, 3}, {0.5f, 2, -1, 7, -4, 1});
  const Tensor c = values(Shape{2, 3}, {10, 0.25f, 0, -3, 1, 2});
  Tensor y = Tensor::empty(Shape{2, 3});
  add.forward({&a, &b, &c}, y, {});
  CHECK(contents(y) == std::vector<float>{11.5f, 0.25f, 2.5f, 4, 1, 2});
  // (x0 + x1) + x2: 1e8 + (-1e8) + 1 is 1, where x0 + (x1 + x2) would round to 0.
  const Tensor big = values(Shape{1, 1}, {1e8f}), minus = values(Shape{1, 1}, {-1e8f}),
               one = values(Shape{1, 1}, {1.0f});
  Add order("order");
  order.setup({Shape{1}, Shape{1}, Shape{1}});
  Tensor s = Tensor::empty(Shape{1, 1});
  order.forward({&big, &minus, &one}, s, {});
  CHECK(s.data()[0] == 1.0f);

  // Every wanted input gradient is the output's gradient (overwritten, not
  // added to); a null one is skipped.
  const Tensor dy = values(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor da = Tensor::empty(Shape{2, 3}), dc = Tensor::empty(Shape{2, 3});
  da.fill(1e9f);
  dc.fill(1e9f);
  add.backward({&a, &b, &c}, y, dy, {&da, nullptr, &dc}, {});
  CHECK(contents(da) == contents(dy));
  CHECK(contents(dc) == contents(dy));
}

TEST_CASE("concat joins along the channels by default, and along any axis") {
  {
    Concat cat("cat", 0);
    REQUIRE(cat.setup({Shape{2, 1, 2}, Shape{1, 1, 2}}) == Shape{3, 1, 2});
    CHECK(cat.describe() == "axis 0");
    const Tensor a = values(Shape{2, 2, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    const Tensor b = values(Shape{2, 1, 1, 2}, {-1, -2, -3, -4});
    Tensor y = Tensor::empty(Shape{2, 3, 1, 2});
    cat.forward({&a, &b}, y, {});
    CHECK(contents(y) == std::vector<float>{1, 2, 3, 4, -1, -2, 5, 6, 7, 8, -3, -4});
    // Backward cuts the gradient back into the inputs' parts; a null one is skipped.
    const Tensor dy = values(Shape{2, 3, 1, 2}, {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21});
    Tensor da = Tensor::empty(a.shape()), db = Tensor::empty(b.shape());
    da.fill(1e9f);
    db.fill(1e9f);
    cat.backward({&a, &b}, y, dy, {&da, &db}, {});
    CHECK(contents(da) == std::vector<float>{10, 11, 12, 13, 16, 17, 18, 19});
    CHECK(contents(db) == std::vector<float>{14, 15, 20, 21});
    da.fill(1e9f);
    cat.backward({&a, &b}, y, dy, {&da, nullptr}, {});
    CHECK(contents(da) == std::vector<float>{10, 11, 12, 13, 16, 17, 18, 19});
  }
  {
    // axis 1 (the rows) of [1,H,2] with three inputs: each sample's rows stacked.
    Concat cat("rows", 1);
    REQUIRE(cat.setup({Shape{1, 1, 2}, Shape{1, 2, 2}, Shape{1, 1, 2}}) == Shape{1, 4, 2});
    const Tensor a = values(Shape{2, 1, 1, 2}, {1, 2, 3, 4});
    const Tensor b = values(Shape{2, 1, 2, 2}, {5, 6, 7, 8, 9, 10, 11, 12});
    const Tensor c = values(Shape{2, 1, 1, 2}, {13, 14, 15, 16});
    Tensor y = Tensor::empty(Shape{2, 1, 4, 2});
    cat.forward({&a, &b, &c}, y, {});
    CHECK(contents(y) == std::vector<float>{1, 2, 5, 6, 7, 8, 13, 14, 3, 4, 9, 10, 11, 12, 15, 16});
  }
  {
    // axis -1 (the last) of [2,W]: each row's columns side by side.
    Concat cat("cols", -1);
    REQUIRE(cat.setup({Shape{2, 2}, Shape{2, 1}}) == Shape{2, 3});
    CHECK(cat.describe() == "axis -1");
    const Tensor a = values(Shape{1, 2, 2}, {1, 2, 3, 4});
    const Tensor b = values(Shape{1, 2, 1}, {5, 6});
    Tensor y = Tensor::empty(Shape{1, 2, 3});
    cat.forward({&a, &b}, y, {});
    CHECK(contents(y) == std::vector<float>{1, 2, 5, 3, 4, 6});
    const Tensor dy = values(Shape{1, 2, 3}, {7, 8, 9, 10, 11, 12});
    Tensor da = Tensor::empty(a.shape()), db = Tensor::empty(b.shape());
    cat.backward({&a, &b}, y, dy, {&da, &db}, {});
    CHECK(contents(da) == std::vector<float>{7, 8, 10, 11});
    CHECK(contents(db) == std::vector<float>{9, 12});
  }
}

TEST_CASE("relu6 clamps to [0, 6] and passes the gradient strictly inside") {
  Relu6 r("r6");
  REQUIRE(r.setup({Shape{9}}) == Shape{9});
  const Tensor x = values(Shape{1, 9}, {-3, 0, 0.5f, 5.99f, 6, 6.01f, 100, -1e-3f, std::nanf("")});
  Tensor y = Tensor::empty(Shape{1, 9});
  r.forward({&x}, y, {});
  const std::vector<float> got = contents(y);
  CHECK(std::vector<float>(got.begin(), got.end() - 1) == std::vector<float>{0, 0, 0.5f, 5.99f, 6, 6, 6, 0});
  CHECK(std::isnan(got.back()));  // a NaN is not hidden
  const Tensor dy = values(Shape{1, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor dx = Tensor::empty(Shape{1, 9});
  dx.fill(1e9f);
  r.backward({&x}, y, dy, {&dx}, {});
  const std::vector<float> g = contents(dx);
  CHECK(std::vector<float>(g.begin(), g.end() - 1) == std::vector<float>{0, 0, 3, 4, 0, 0, 0, 0});

  // Long enough for the vector loop and its remainder.
  Relu6 wide("wide");
  wide.setup({Shape{37}});
  Rng rng(3);
  Tensor xs = Tensor::empty(Shape{3, 37});
  rng.fill(xs, 5.0f);
  Tensor ys = Tensor::empty(Shape{3, 37});
  wide.forward({&xs}, ys, {});
  for (int64_t i = 0; i < xs.numel(); ++i) {
    CAPTURE(i);
    CHECK(ys.data()[i] == std::min(std::max(xs.data()[i], 0.0f), 6.0f));
  }
}

TEST_CASE("gradcheck: add, concat and relu6") {
  Rng rng(41);
  {
    Harness h(std::make_unique<Add>("sum"),
              std::vector<Shape>{Shape{3, 4, 5}, Shape{3, 4, 5}, Shape{3, 4, 5}}, 3, rng);
    expectGradOk(h, rng);
  }
  struct CatCase {
    int64_t axis;
    std::vector<Shape> in;
  };
  const CatCase cats[] = {
      {0, {Shape{2, 3, 5}, Shape{3, 3, 5}}},
      {1, {Shape{2, 3, 5}, Shape{2, 1, 5}, Shape{2, 2, 5}}},
      {-1, {Shape{2, 3, 4}, Shape{2, 3, 1}}},
      {0, {Shape{7}, Shape{4}}},
  };
  for (const CatCase& k : cats) {
    CAPTURE(k.axis);
    CAPTURE(k.in[0].str());
    Harness h(std::make_unique<Concat>("cat", k.axis), k.in, 3, rng);
    expectGradOk(h, rng);
  }
  {
    // 180 values 0.1 apart span [-9, 9]: both kinks and both flat parts.
    Harness h(std::make_unique<Relu6>("r6"), Shape{3, 5, 4}, 3, rng);
    fillDistinct(h.x, rng, 0.1f);
    expectGradOk(h, rng);
  }
}

TEST_CASE("a wrong input gradient fails the multi-input gradcheck") {
  // The checker itself must see every input: a layer that forgets its second
  // input's gradient is caught.
  class HalfAdd : public Add {
   public:
    using Add::Add;
    void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                  const std::vector<Tensor*>& din, const LayerContext& ctx) override {
      Add::backward(in, out, dout, din, ctx);
      if (din[1]) din[1]->zero();
    }
  };
  Rng rng(43);
  Harness h(std::make_unique<HalfAdd>("sum"), std::vector<Shape>{Shape{4}, Shape{4}}, 2, rng);
  const GradCheckResult r = gradCheck(h, rng);
  CHECK(r.worst > 1.0);
  CHECK(r.where.find("input 1") == 0);
}

TEST_CASE("add and concat shape errors name the layer and the shapes") {
  Add add("sum");
  CHECK(shapeError(add, {Shape{4, 8, 8}, Shape{8, 8, 8}}) ==
        "layer 'sum' (add) sums inputs of one shape, but input 0 is [4,8,8] and input 1 is [8,8,8]");
  CHECK(shapeError(add, {Shape{4}, Shape{4}, Shape{2, 2}}) ==
        "layer 'sum' (add) sums inputs of one shape, but input 0 is [4] and input 2 is [2,2]");
  CHECK(shapeError(add, {Shape{4}}) == "layer 'sum' (add) takes two or more inputs, got 1");

  Concat cat("cat", 0);
  CHECK(shapeError(cat, {Shape{4, 8, 8}, Shape{2, 8, 6}}) ==
        "layer 'cat' (concat) joins its inputs along axis 0, so every other extent must match, but input 0 "
        "is [4,8,8] and input 1 is [2,8,6]");
  CHECK(shapeError(cat, {Shape{4, 8, 8}, Shape{2, 64}}) ==
        "layer 'cat' (concat) joins its inputs along axis 0, so every other extent must match, but input 0 "
        "is [4,8,8] and input 1 is [2,64]");
  Concat last("cat", -1);
  CHECK(shapeError(last, {Shape{4, 8, 8}, Shape{4, 7, 2}}) ==
        "layer 'cat' (concat) joins its inputs along axis 2, so every other extent must match, but input 0 "
        "is [4,8,8] and input 1 is [4,7,2]");
  Concat far("cat", 3);
  CHECK(shapeError(far, {Shape{4, 8, 8}, Shape{4, 8, 8}}) ==
        "layer 'cat' (concat): axis 3 is out of range for inputs of rank 3 like [4,8,8]; use an axis from -3 "
        "to 2");
  Concat before("cat", -4);
  CHECK(shapeError(before, {Shape{4, 8, 8}, Shape{4, 8, 8}}).find("axis -4 is out of range") !=
        std::string::npos);
  CHECK(shapeError(cat, {Shape{4, 8, 8}}) == "layer 'cat' (concat) takes two or more inputs, got 1");
}

TEST_CASE("add, concat and relu6 through the registry: options") {
  const LayerRegistry registry = builtinLayers();
  LayerOptions axis("cat", "concat", SourcePos{"job.toml", 7, 1});
  axis.set("axis", int64_t{-2}, SourcePos{"job.toml", 8, 1});
  auto cat = registry.create("concat", "cat", axis, {});
  CHECK(cat->describe() == "axis -2");
  CHECK(cat->setup({Shape{2, 3, 4}, Shape{2, 5, 4}}) == Shape{2, 8, 4});
  CHECK(registry.create("concat", "c", LayerOptions("c", "concat", {}), {})->describe() == "axis 0");

  auto optionError = [&](const std::string& type, const std::string& key) {
    LayerOptions o("x", type, SourcePos{"job.toml", 7, 1});
    o.set(key, int64_t{1}, SourcePos{"job.toml", 8, 1});
    try {
      registry.create(type, "x", o, {});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(optionError("add", "axis").find("unknown option 'axis'") != std::string::npos);
  CHECK(optionError("relu6", "max").find("unknown option 'max'") != std::string::npos);
  CHECK(optionError("concat", "axes").find("unknown option 'axes'") != std::string::npos);
  CHECK(optionError("concat", "axes").find("job.toml:8:1") == 0);
}

TEST_CASE("the model refuses add and concat with fewer than two inputs, naming the layer") {
  const Shape input{2, 4, 4};
  CHECK(modelError({spec("c1", "conv2d", {}, 3, {{"filters", int64_t{2}}, {"padding", int64_t{1}}}),
                    spec("sum", "add", {"c1"}, 7), spec("flat", "flatten", {}, 10),
                    spec("fc", "dense", {}, 12, {{"units", int64_t{3}}})},
                   input) ==
        "job.toml:7:1: [model.layers] 'sum' (add) takes two or more inputs, got 1; list them in its inputs");
  // Without `inputs` a layer reads the previous one: still one input.
  CHECK(
      modelError({spec("c1", "conv2d", {}, 3, {{"filters", int64_t{2}}}), spec("cat", "concat", {}, 7),
                  spec("flat", "flatten", {}, 10), spec("fc", "dense", {}, 12, {{"units", int64_t{3}}})},
                 input) ==
      "job.toml:7:1: [model.layers] 'cat' (concat) takes two or more inputs, got 1; list them in its inputs");
  // A shape mismatch found by setup() carries the layer's position.
  CHECK(modelError({spec("c1", "conv2d", {}, 3, {{"filters", int64_t{3}}, {"padding", int64_t{1}}}),
                    spec("sum", "add", {"c1", "input"}, 7), spec("flat", "flatten", {}, 10),
                    spec("fc", "dense", {}, 12, {{"units", int64_t{3}}})},
                   input) ==
        "job.toml:7:1: layer 'sum' (add) sums inputs of one shape, but input 0 is [3,4,4] "
        "and input 1 is [2,4,4]");
}

TEST_CASE("add with a fused relu: values, and gradients masked by the output") {
  Rng rng(43);
  Harness h(std::make_unique<Add>("sum"), std::vector<Shape>{Shape{2, 3, 4}, Shape{2, 3, 4}}, 3, rng);
  REQUIRE(h.layer->fuseActivation("relu"));
  CHECK_FALSE(h.layer->fuseActivation("relu"));  // once
  CHECK(h.layer->describe() == "relu fused");
  // The sums stay at least 0.02 away from the kink, farther than the gradcheck's step.
  fillDistinct(h.xs[0], rng, 0.1f);
  for (int64_t i = 0; i < h.xs[1].numel(); ++i) h.xs[1].data()[i] = 0.01f * rng.uniform(-1.0f, 1.0f);
  h.forward();
  for (int64_t i = 0; i < h.y.numel(); ++i)
    CHECK(h.y.data()[i] == std::max(h.xs[0].data()[i] + h.xs[1].data()[i], 0.0f));
  expectGradOk(h, rng);
}
