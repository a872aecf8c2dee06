// Finite-difference gradient checks for every layer: input and parameter
// gradients, odd sizes (batch 3, odd H/W, stride 2, padding, non-square
// kernels), every convolution algorithm.
//
// Choice of step and tolerance: every layer here is linear in each single
// input or parameter element, or piecewise linear with kinks (relu at 0,
// max-pool ties) that the inputs keep > eps away from (fillDistinct). So
// central differences have no truncation error and the only error is float
// round-off in the outputs an element touches, divided by 2*eps. A large step,
// eps = 1e-2, keeps that below ~1e-4 for O(1) values, and the tolerance
// |numeric - analytic| <= 2e-3 + 2e-3 * |analytic| leaves an order of
// magnitude of margin (Winograd's transforms add a little round-off) while
// still catching any indexing error, which shows up as O(1) differences.
// The loss L = sum(y * R) is accumulated in double.
#include <doctest/doctest.h>

#include "core/nn/layers/avg_pool.h"
#include "core/nn/layers/conv2d.h"
#include "core/nn/layers/dense.h"
#include "core/nn/layers/dropout.h"
#include "core/nn/layers/flatten.h"
#include "core/nn/layers/global_avg_pool.h"
#include "core/nn/layers/max_pool.h"
#include "core/nn/layers/relu.h"
#include "nn_test_util.h"
#include "tests/common/conv_config.h"

using namespace dtrain;
using namespace dtrain::test;
using dtrain::testing::convConfig;

namespace {

void expectGradOk(Harness& h, Rng& rng, const LayerContext& ctx = {}) {
  GradCheckResult r = gradCheck(h, rng, ctx);
  INFO("worst: " << r.where);
  CHECK(r.checked > 0);
  CHECK(r.worst <= 1.0);
}

PoolConfig pool(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  return PoolConfig{kh, kw, sh, sw, ph, pw};
}

}  // namespace

TEST_CASE("gradcheck: dense") {
  Rng rng(11);
  for (bool bias : {true, false}) {
    CAPTURE(bias);
    Harness h(std::make_unique<Dense>("fc", DenseConfig{5, bias, InitKind::HeNormal}), Shape{7}, 3, rng);
    expectGradOk(h, rng);
  }
}

TEST_CASE("gradcheck: conv2d im2col") {
  struct Case {
    Shape in;
    Conv2dConfig c;
  };
  const Case cases[] = {
      {Shape{3, 7, 6}, convConfig(4, 3, 2, 2, 1, 1, 0, ConvAlgo::Im2col)},         // non-square, stride 2x1
      {Shape{2, 9, 7}, convConfig(3, 3, 3, 2, 2, 2, 2, ConvAlgo::Im2col)},         // stride 2, padding 2
      {Shape{5, 5, 3}, convConfig(2, 1, 1, 1, 1, 0, 0, ConvAlgo::Im2col)},         // pointwise path
      {Shape{2, 6, 5}, convConfig(3, 1, 3, 1, 2, 0, 1, ConvAlgo::Im2col, false)},  // 1x3, no bias
      {Shape{1, 5, 5}, convConfig(2, 5, 5, 1, 1, 0, 0, ConvAlgo::Im2col)},         // kernel = input
      {Shape{15, 7, 6}, convConfig(3, 3, 3, 2, 2, 1, 1, ConvAlgo::Im2col)},  // k = 135: packed gemm path
      {Shape{65, 3, 3}, convConfig(2, 1, 1, 1, 1, 0, 0, ConvAlgo::Im2col)},  // pointwise, packed gemm path
  };
  Rng rng(12);
  for (const Case& k : cases) {
    CAPTURE(k.in.str());
    Harness h(std::make_unique<Conv2d>("c", k.c), k.in, 3, rng);
    expectGradOk(h, rng);
  }
}

TEST_CASE("gradcheck: conv2d winograd") {
  struct Case {
    Shape in;
    int64_t pad;
  };
  // Odd and even output extents (clipped edge tiles), every padding, a tile row
  // wider than one vector (Wo = 19: 10 tiles), and several samples per chunk.
  const Case cases[] = {{Shape{3, 7, 5}, 1},
                        {Shape{2, 6, 8}, 0},
                        {Shape{3, 5, 4}, 2},
                        {Shape{2, 5, 19}, 1},
                        {Shape{1, 3, 3}, 0}};
  Rng rng(13);
  for (ConvAlgo algo : {ConvAlgo::Winograd2x2, ConvAlgo::Winograd4x4})
    for (const Case& k : cases) {
      CAPTURE(algo == ConvAlgo::Winograd4x4);
      CAPTURE(k.in.str());
      CAPTURE(k.pad);
      auto layer = std::make_unique<Conv2d>("c", convConfig(4, 3, 3, 1, 1, k.pad, k.pad, algo));
      Harness h(std::move(layer), k.in, 3, rng);
      expectGradOk(h, rng);
    }
}

TEST_CASE("gradcheck: conv2d winograd across several chunks") {
  // 19x17 with padding 1 has 90 tiles per sample: one sample per chunk.
  Rng rng(14);
  auto layer = std::make_unique<Conv2d>("c", convConfig(3, 3, 3, 1, 1, 1, 1, ConvAlgo::Winograd2x2));
  Harness h(std::move(layer), Shape{2, 19, 17}, 3, rng);
  expectGradOk(h, rng);
  // F(4x4,3x3) over several chunks: winograd4x4_test.cpp (against im2col).
}

TEST_CASE("gradcheck: conv2d winograd with packed products") {
  // More filters than ops::gemmUnpacked takes: the products go through gemm.
  Rng rng(18);
  for (ConvAlgo algo : {ConvAlgo::Winograd2x2, ConvAlgo::Winograd4x4}) {
    CAPTURE(algo == ConvAlgo::Winograd4x4);
    auto layer = std::make_unique<Conv2d>("c", convConfig(129, 3, 3, 1, 1, 1, 1, algo));
    Harness h(std::move(layer), Shape{2, 5, 5}, 3, rng);
    expectGradOk(h, rng);
  }
}

TEST_CASE("gradcheck: max_pool") {
  const std::pair<Shape, PoolConfig> cases[] = {
      {Shape{2, 7, 5}, pool(2, 2, 2, 2, 0, 0)},  // the fast path, odd extents
      {Shape{2, 7, 6}, pool(3, 3, 2, 2, 1, 1)},  // overlapping windows with padding
      {Shape{3, 5, 7}, pool(3, 2, 1, 2, 1, 1)},  // non-square, stride 1x2
  };
  Rng rng(15);
  for (const auto& [in, c] : cases) {
    CAPTURE(in.str());
    Harness h(std::make_unique<MaxPool>("p", c), in, 3, rng);
    fillDistinct(h.x, rng);
    expectGradOk(h, rng);
  }
}

TEST_CASE("gradcheck: avg_pool") {
  const std::pair<Shape, PoolConfig> cases[] = {
      {Shape{2, 7, 5}, pool(2, 2, 2, 2, 0, 0)},
      {Shape{2, 7, 6}, pool(3, 3, 2, 2, 1, 1)},
      {Shape{3, 5, 7}, pool(3, 2, 1, 2, 1, 1)},
  };
  Rng rng(16);
  for (const auto& [in, c] : cases) {
    CAPTURE(in.str());
    Harness h(std::make_unique<AvgPool>("p", c), in, 3, rng);
    expectGradOk(h, rng);
  }
}

TEST_CASE("gradcheck: global_avg_pool") {
  Rng rng(23);
  Harness h(std::make_unique<GlobalAvgPool>("gap"), Shape{4, 5, 3}, 3, rng);
  expectGradOk(h, rng);
}

TEST_CASE("gradcheck: relu, flatten, dropout") {
  Rng rng(17);
  {
    Harness h(std::make_unique<Relu>("r"), Shape{3, 5, 3}, 3, rng);
    fillDistinct(h.x, rng);
    expectGradOk(h, rng);
  }
  {
    Harness h(std::make_unique<Flatten>("f"), Shape{3, 5, 3}, 3, rng);
    expectGradOk(h, rng);
  }
  for (bool training : {true, false}) {
    CAPTURE(training);
    LayerContext ctx;
    ctx.training = training;
    ctx.seed = 99;
    ctx.layer_index = 4;
    ctx.sample_offset = 10;
    Harness h(std::make_unique<Dropout>("d", 0.4), Shape{4, 5}, 3, rng);
    expectGradOk(h, rng, ctx);
  }
}
