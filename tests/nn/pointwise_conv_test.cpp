// Conv2d's pointwise algorithm (a 1x1 kernel over a small plane as one
// product over the batch, conv2d_pointwise.cpp): chosen where it should be,
// gradients by finite differences on each of its product paths (unpacked with
// the rows weight gradient, unpacked with gemm's, packed), and the same
// results as the per-sample im2col algorithm, with and without a fused relu.
#include <doctest/doctest.h>

#include "core/errors.h"
#include "core/nn/layers/conv2d.h"
#include "nn_test_util.h"
#include "tests/common/conv_config.h"

using namespace dtrain;
using namespace dtrain::test;
using dtrain::testing::convConfig;

namespace {

Conv2dConfig pointwise(int64_t filters, ConvAlgo algo = ConvAlgo::Auto, bool bias = true) {
  return convConfig(filters, 1, 1, 1, 1, 0, 0, algo, bias);
}

ConvAlgo chosen(const Conv2dConfig& c, const Shape& in) {
  Conv2d layer("c", c);
  layer.setup({in});
  return layer.algorithm();
}

}  // namespace

TEST_CASE("conv2d: a 1x1 kernel over a plane of at most 64 pixels takes the pointwise algorithm") {
  CHECK(chosen(pointwise(8), Shape{16, 8, 8}) == ConvAlgo::Pointwise);
  CHECK(chosen(pointwise(8), Shape{16, 3, 3}) == ConvAlgo::Pointwise);
  CHECK(chosen(pointwise(8), Shape{16, 9, 9}) == ConvAlgo::Im2col);  // 81 pixels: per sample
  CHECK(chosen(convConfig(8, 1, 1, 2, 2, 0, 0), Shape{16, 6, 6}) == ConvAlgo::Im2col);  // stride 2
  CHECK(chosen(convConfig(8, 1, 1, 1, 1, 1, 1), Shape{16, 6, 6}) == ConvAlgo::Im2col);  // padded
  Conv2dConfig grouped = pointwise(8);
  grouped.groups = 2;
  CHECK(chosen(grouped, Shape{16, 6, 6}) == ConvAlgo::Im2col);
  // Pinned, it runs at any plane size, and refuses a kernel it cannot compute.
  CHECK(chosen(pointwise(8, ConvAlgo::Pointwise), Shape{16, 20, 20}) == ConvAlgo::Pointwise);
  Conv2d three("c", convConfig(8, 3, 3, 1, 1, 1, 1, ConvAlgo::Pointwise));
  CHECK_THROWS_AS(three.setup({Shape{16, 6, 6}}), ShapeError);
}

TEST_CASE("gradcheck: conv2d pointwise") {
  struct Case {
    Shape in;
    Conv2dConfig c;
  };
  const Case cases[] = {
      {Shape{5, 3, 5}, pointwise(4, ConvAlgo::Pointwise)},          // unpacked, rows weight gradient
      {Shape{12, 3, 3}, pointwise(7, ConvAlgo::Pointwise)},         // unpacked, gemm weight gradient
      {Shape{12, 2, 3}, pointwise(7, ConvAlgo::Pointwise, false)},  // no bias
      {Shape{130, 2, 2}, pointwise(3, ConvAlgo::Pointwise)},        // packed products
  };
  Rng rng(31);
  for (const Case& k : cases) {
    CAPTURE(k.in.str());
    Harness h(std::make_unique<Conv2d>("c", k.c), k.in, 3, rng);
    GradCheckResult r = gradCheck(h, rng);
    INFO("worst: " << r.where);
    CHECK(r.checked > 0);
    CHECK(r.worst <= 1.0);
  }
}

TEST_CASE("conv2d pointwise computes what per-sample im2col computes, with and without a fused relu") {
  for (int64_t channels : {6, 40, 140}) {  // the rows, unpacked-gemm and packed paths
    for (bool relu : {false, true}) {
      CAPTURE(channels);
      CAPTURE(relu);
      const Shape in{channels, 5, 7};
      Rng ra(9), rb(9);  // the same parameters, inputs and output gradients
      Harness batched(std::make_unique<Conv2d>("c", pointwise(9, ConvAlgo::Pointwise)), in, 4, ra);
      Harness per_sample(std::make_unique<Conv2d>("c", pointwise(9, ConvAlgo::Im2col)), in, 4, rb);
      if (relu) {
        REQUIRE(batched.layer->fuseActivation("relu"));
        REQUIRE(per_sample.layer->fuseActivation("relu"));
      }
      batched.forward();
      per_sample.forward();
      CHECK(maxRelDiff(batched.y, per_sample.y) < 1e-5);  // sums in another order: rounding only
      for (bool want_dx : {true, false}) {
        CAPTURE(want_dx);
        batched.zeroGrads();
        per_sample.zeroGrads();
        batched.backward({}, want_dx);
        per_sample.backward({}, want_dx);
        for (size_t i = 0; i < batched.grads.size(); ++i)
          CHECK(maxRelDiff(batched.grads[i], per_sample.grads[i]) < 1e-5);
        if (want_dx) CHECK(maxRelDiff(batched.dx, per_sample.dx) < 1e-5);
      }
    }
  }
}
