// The layers of GPT-style models on the CPU: gradients against finite
// differences, values against direct formulas, and the errors a user meets
// (an id outside the vocabulary, a sequence longer than the position table).
//
// Step and tolerance: unlike the piecewise-linear layers of gradcheck_test.cpp,
// gelu and layer_norm are smooth but curved, so central differences carry a
// truncation error of eps^2/6 * f''' besides float round-off. With inputs of
// O(1), f''' stays O(1) for both (gelu's is at most about 1.6; layer_norm's
// about rstd^3 * C^0 for unit-variance rows), so eps = 1e-2 gives a
// truncation error near 2e-5, an order of magnitude under the 2e-3 tolerance
// gradcheck_test.cpp derives for round-off. An indexing error shows as O(1).
#include <doctest/doctest.h>

#include <cmath>

#include "core/errors.h"
#include "core/nn/layers/dense.h"
#include "core/nn/layers/embedding.h"
#include "core/nn/layers/gelu.h"
#include "core/nn/layers/layer_norm.h"
#include "core/nn/layers/position_embedding.h"
#include "nn_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

void expectGradOk(Harness& h, Rng& rng, bool check_inputs = true) {
  GradCheckResult r = gradCheck(h, rng, {}, 1e-2f, 2e-3, 2e-3, 400, check_inputs);
  INFO("worst: " << r.where);
  CHECK(r.checked > 0);
  CHECK(r.worst <= 1.0);
}

// Whole-number ids in [0, vocab), as a token batch holds them.
void fillIds(Tensor& t, Rng& rng, int64_t vocab) {
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data()[i] = static_cast<float>(std::uniform_int_distribution<int64_t>(0, vocab - 1)(rng.engine()));
}

}  // namespace

TEST_CASE("gelu: values of GPT-2's tanh approximation, and gradients") {
  Rng rng(3);
  Harness h(std::make_unique<Gelu>("g"), Shape{4, 6}, 3, rng);
  h.forward();
  for (int64_t i = 0; i < h.x.numel(); ++i) {
    const double x = h.x.data()[i];
    const double want = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    CHECK(h.y.data()[i] == doctest::Approx(want).epsilon(1e-6).scale(1.0));
  }
  expectGradOk(h, rng);
}

TEST_CASE("layer_norm: each token's channels normalised, then scaled and shifted; gradients") {
  Rng rng(5);
  for (const Shape& in : {Shape{5, 7}, Shape{9}}) {
    CAPTURE(in.str());
    Harness h(std::make_unique<LayerNorm>("ln", 1e-5f), in, 2, rng);
    h.forward();
    const int64_t cols = in[in.rank() - 1], rows = h.x.numel() / cols;
    const float* w = h.params[0].data();
    const float* b = h.params[1].data();
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < cols; ++c) mean += h.x.data()[r * cols + c];
      mean /= cols;
      for (int64_t c = 0; c < cols; ++c) var += std::pow(h.x.data()[r * cols + c] - mean, 2);
      var /= cols;
      for (int64_t c = 0; c < cols; ++c) {
        const double want = (h.x.data()[r * cols + c] - mean) / std::sqrt(var + 1e-5) * w[c] + b[c];
        CHECK(h.y.data()[r * cols + c] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
      }
    }
    expectGradOk(h, rng);
  }
}

TEST_CASE("layer_norm: a row with a large mean keeps its variance") {
  // Float sums of 1000 + small deviations lose the deviations; the double
  // statistics do not.
  Rng rng(9);
  Harness h(std::make_unique<LayerNorm>("ln", 1e-5f), Shape{2, 64}, 1, rng);
  for (int64_t i = 0; i < h.x.numel(); ++i) h.x.data()[i] = 1000.0f + 0.01f * static_cast<float>(i % 7);
  h.params[0].fill(1.0f);
  h.params[1].fill(0.0f);
  h.forward();
  double sq = 0;
  for (int64_t c = 0; c < 64; ++c) sq += h.y.data()[c] * h.y.data()[c];
  CHECK(sq / 64 == doctest::Approx(1.0).epsilon(0.05));  // eps 1e-5 against a variance of 4e-4
}

TEST_CASE("embedding: rows of the table by id, gradients summed per id") {
  Rng rng(7);
  Harness h(std::make_unique<Embedding>("wte", EmbeddingConfig{11, 4}), Shape{6}, 3, rng);
  fillIds(h.x, rng, 11);
  h.x.data()[0] = h.x.data()[1] = 3.0f;  // a repeated id: its gradient rows add
  h.forward();
  for (int64_t t = 0; t < h.x.numel(); ++t)
    for (int64_t c = 0; c < 4; ++c)
      CHECK(h.y.data()[t * 4 + c] == h.params[0].data()[static_cast<int64_t>(h.x.data()[t]) * 4 + c]);
  expectGradOk(h, rng, /*check_inputs=*/false);
}

TEST_CASE("embedding: an id outside the vocabulary is one error naming the layer, sample and token") {
  Rng rng(8);
  Harness h(std::make_unique<Embedding>("wte", EmbeddingConfig{5, 2}), Shape{4}, 2, rng);
  fillIds(h.x, rng, 5);
  for (float bad : {5.0f, -1.0f, 2.5f, NAN}) {
    CAPTURE(bad);
    h.x.data()[6] = bad;  // sample 1, token 2
    LayerContext ctx;
    ctx.sample_offset = 10;
    try {
      h.forward(ctx);
      FAIL("no error");
    } catch (const DataError& e) {
      const std::string msg = e.what();
      CHECK(msg.find("layer 'wte' (embedding): token 2 of sample 11") != std::string::npos);
      CHECK(msg.find("not an id in [0, 5)") != std::string::npos);
    }
  }
}

TEST_CASE("position_embedding: adds the table's first T rows; gradients") {
  Rng rng(13);
  Harness h(std::make_unique<PositionEmbedding>("wpe", PositionEmbeddingConfig{8, 0.02}), Shape{5, 3}, 2,
            rng);
  h.forward();
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t i = 0; i < 15; ++i)
      CHECK(h.y.data()[s * 15 + i] == h.x.data()[s * 15 + i] + h.params[0].data()[i]);
  expectGradOk(h, rng);
}

TEST_CASE("position_embedding: a sequence longer than the context is refused, not truncated") {
  PositionEmbedding wpe("wpe", PositionEmbeddingConfig{4, 0.02});
  CHECK_THROWS_WITH_AS(wpe.setup({Shape{5, 3}}),
                       doctest::Contains("sequences of 5 tokens exceed its context of 4 positions"),
                       ShapeError);
  CHECK(wpe.setup({Shape{4, 3}}) == Shape{4, 3});
}

TEST_CASE("dense on a sequence: each token through the same weights, as rows of one product") {
  Rng rng(17);
  Harness seq(std::make_unique<Dense>("fc", DenseConfig{5, true, InitKind::HeNormal}), Shape{3, 4}, 2, rng);
  CHECK(seq.out_shape == Shape{3, 5});
  seq.forward();
  // The same layer on the 6 tokens as 6 flat samples.
  Harness flat(std::make_unique<Dense>("fc", DenseConfig{5, true, InitKind::HeNormal}), Shape{4}, 6, rng);
  for (size_t k = 0; k < 2; ++k) flat.params[k].copyFrom(seq.params[k]);
  flat.x.copyFrom(seq.x.reshape(flat.x.shape()));
  flat.forward();
  for (int64_t i = 0; i < flat.y.numel(); ++i) CHECK(seq.y.data()[i] == flat.y.data()[i]);
  expectGradOk(seq, rng);
  Dense image("fc", DenseConfig{5, true, InitKind::HeNormal});
  CHECK_THROWS_WITH_AS(image.setup({Shape{1, 4, 4}}), doctest::Contains("add a flatten layer"), ShapeError);
}
