// Dropout: the mask does not depend on how the batch is split, kept elements
// are scaled by 1/(1-rate) and kept at the expected rate, inference is the
// identity, and backward applies the forward's mask.
#include "core/nn/layers/dropout.h"

#include <doctest/doctest.h>

#include <cmath>

#include "nn_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

LayerContext trainCtx(uint64_t seed, int layer, int64_t offset) {
  LayerContext ctx;
  ctx.training = true;
  ctx.seed = seed;
  ctx.layer_index = layer;
  ctx.sample_offset = offset;
  return ctx;
}

}  // namespace

TEST_CASE("dropout: mask independent of the batch split") {
  Rng rng(41);
  const int64_t n = 10, features = 37;
  Dropout layer("d", 0.5);
  layer.setup({Shape{features}});
  Tensor x = Tensor::empty(Shape{n, features});
  rng.fill(x);
  Tensor whole = Tensor::empty(x.shape());
  layer.forward({&x}, whole, trainCtx(5, 2, 100));
  // The same samples as two slices, as two threads would see them.
  for (int64_t cut : {1, 4, 9}) {
    Tensor parts = Tensor::empty(x.shape());
    Tensor x0 = x.narrow(0, cut), x1 = x.narrow(cut, n - cut);
    Tensor y0 = parts.narrow(0, cut), y1 = parts.narrow(cut, n - cut);
    layer.forward({&x0}, y0, trainCtx(5, 2, 100));
    layer.forward({&x1}, y1, trainCtx(5, 2, 100 + cut));
    CHECK(maxRelDiff(parts, whole) == 0.0);
  }
  // Another seed, layer or sample offset gives another mask.
  for (const LayerContext& other : {trainCtx(6, 2, 100), trainCtx(5, 3, 100), trainCtx(5, 2, 101)}) {
    Tensor y = Tensor::empty(x.shape());
    layer.forward({&x}, y, other);
    CHECK(maxRelDiff(y, whole) > 0.0);
  }
}

TEST_CASE("dropout: keep rate and scale") {
  for (double rate : {0.1, 0.5, 0.8}) {
    CAPTURE(rate);
    const int64_t n = 64, features = 1000;
    Dropout layer("d", rate);
    layer.setup({Shape{features}});
    Tensor x = Tensor::empty(Shape{n, features}), y = Tensor::empty(Shape{n, features});
    x.fill(1.0f);
    layer.forward({&x}, y, trainCtx(7, 1, 0));
    const float scale = 1.0f / (1.0f - static_cast<float>(rate));  // as the layer computes it
    int64_t kept = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      const float v = y.data()[i];
      CHECK((v == 0.0f || v == scale));
      kept += v != 0.0f;
    }
    const double frac = static_cast<double>(kept) / static_cast<double>(y.numel());
    // 64000 Bernoulli draws: standard deviation <= 0.002.
    CHECK(std::fabs(frac - (1.0 - rate)) < 0.01);
  }
}

TEST_CASE("dropout: identity at inference and for rate 0") {
  Rng rng(42);
  Tensor x = Tensor::empty(Shape{4, 6}), y = Tensor::empty(Shape{4, 6}), dy = Tensor::empty(Shape{4, 6}),
         dx = Tensor::empty(Shape{4, 6});
  rng.fill(x);
  rng.fill(dy);
  LayerContext eval = trainCtx(1, 1, 0);
  eval.training = false;
  Dropout d("d", 0.5);
  d.setup({Shape{6}});
  d.forward({&x}, y, eval);
  CHECK(maxRelDiff(y, x) == 0.0);
  d.backward({&x}, y, dy, {&dx}, eval);
  CHECK(maxRelDiff(dx, dy) == 0.0);
  Dropout zero("z", 0.0);
  zero.setup({Shape{6}});
  zero.forward({&x}, y, trainCtx(1, 1, 0));
  CHECK(maxRelDiff(y, x) == 0.0);
}

TEST_CASE("dropout: backward uses the forward mask") {
  Rng rng(43);
  const int64_t n = 5, features = 50;
  Dropout layer("d", 0.3);
  layer.setup({Shape{features}});
  Tensor x = Tensor::empty(Shape{n, features}), y = Tensor::empty(x.shape()), dy = Tensor::empty(x.shape()),
         dx = Tensor::empty(x.shape());
  fillDistinct(x, rng);  // no zeros: y == 0 exactly where dropped
  rng.fill(dy);
  const LayerContext ctx = trainCtx(9, 0, 3);
  layer.forward({&x}, y, ctx);
  layer.backward({&x}, y, dy, {&dx}, ctx);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float expected = y.data()[i] == 0.0f ? 0.0f : dy.data()[i] / 0.7f;
    CHECK(dx.data()[i] == doctest::Approx(expected).epsilon(1e-6));
  }
}
