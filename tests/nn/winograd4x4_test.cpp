// Conv2d's Winograd F(4x4,3x3) algorithm against per-sample im2col (exact
// sums of nine products) on the same parameters, inputs and output
// gradients: forward, input and parameter gradients, at every padding, odd
// extents (clipped edge tiles), tile rows wider than one vector, several
// chunks per batch, with and without bias and a fused relu. Finite
// differences (gradcheck_test.cpp) check the gradients on small shapes;
// here large shapes, where a finite difference drowns in the forward's
// round-off, test the chunking and the tile edges.
#include <doctest/doctest.h>

#include "core/nn/layers/conv2d.h"
#include "nn_test_util.h"
#include "tests/common/conv_config.h"

using namespace dtrain;
using namespace dtrain::test;
using dtrain::testing::convConfig;

TEST_CASE("conv2d winograd 4x4 computes what im2col computes") {
  struct Case {
    Shape in;
    int64_t pad, filters;
    bool bias, relu;
  };
  const Case cases[] = {
      {Shape{5, 32, 32}, 1, 8, true, true},     // ResNet's first stage: 64 tiles, 4 samples per chunk
      {Shape{4, 38, 37}, 1, 6, true, false},    // 10x10 tiles, odd width: 2 samples per chunk
      {Shape{3, 9, 70}, 0, 5, false, true},     // 2x17 tiles: a row of three vectors, no padding
      {Shape{6, 11, 13}, 2, 7, true, false},    // padding 2, clipped edge tiles
      {Shape{3, 7, 45}, 2, 4, true, true},      // padding 2 across vectors: 12 tiles per row
      {Shape{4, 8, 8}, 1, 16, true, true},      // 4 tiles per sample: 64 samples per chunk
      {Shape{40, 6, 7}, 1, 150, false, false},  // packed products (more than gemmUnpacked takes)
  };
  for (const Case& k : cases) {
    CAPTURE(k.in.str());
    CAPTURE(k.pad);
    CAPTURE(k.relu);
    const int64_t n = 5;
    Rng ra(5), rb(5);  // the same parameters, inputs and output gradients
    auto config = [&](ConvAlgo algo) {
      return convConfig(k.filters, 3, 3, 1, 1, k.pad, k.pad, algo, k.bias);
    };
    Harness wino(std::make_unique<Conv2d>("c", config(ConvAlgo::Winograd4x4)), k.in, n, ra);
    Harness direct(std::make_unique<Conv2d>("c", config(ConvAlgo::Im2col)), k.in, n, rb);
    if (k.relu) {
      REQUIRE(wino.layer->fuseActivation("relu"));
      REQUIRE(direct.layer->fuseActivation("relu"));
    }
    wino.forward();
    direct.forward();
    // Round-off only, which F(4x4,3x3)'s transforms (weights 1/6 and 1/24,
    // terms of up to 8x a tile value) raise to 1e-5..1e-4 of the output's
    // scale, growing with the channels: 3e-5 at 5 channels, 1.2e-4 at 40
    // (F(2x2,3x3): 1e-6..2e-5). An indexing error gives O(1).
    CHECK(maxRelDiff(wino.y, direct.y) < 2e-4);
    for (bool want_dx : {true, false}) {
      CAPTURE(want_dx);
      wino.zeroGrads();
      direct.zeroGrads();
      wino.backward({}, want_dx);
      direct.backward({}, want_dx);
      if (want_dx) CHECK(maxRelDiff(wino.dx, direct.dx) < 2e-4);
      // Parameter gradients sum over every output position of the batch.
      for (size_t i = 0; i < wino.grads.size(); ++i) {
        CAPTURE(i);
        CHECK(maxRelDiff(wino.grads[i], direct.grads[i]) < 5e-4);
      }
    }
  }
}
