// The GPT model's layers on a GPU against the CPU's, fp32: GELU and the
// embeddings to float rounding, layer norm and attention (the sums in another
// order, the exponentials of another library) within 1e-5 and 1e-4. Attention
// over sequences that are not a multiple of the kernels' tiles, heads of 32,
// 64 and 128 dimensions, with and without dropout of the probabilities.
#include "core/nn/cuda/cuda_sequence_layers.h"

#include <doctest/doctest.h>

#include <random>

#include "tests/cuda/layer_compare.h"

using namespace dtrain;
using namespace dtrain::testing;

TEST_CASE("cuda: gelu, layer_norm and the position embedding equal the CPU layers") {
  Case c;
  c.input = Shape{7, 37};
  c.tolerance = 1e-5;
  Gelu gelu("gelu");
  compareLayer<CudaGelu>(gelu, std::make_unique<Gelu>("gelu"), c);
  LayerNorm norm("ln", 1e-5f);
  compareLayer<CudaLayerNorm>(norm, std::make_unique<LayerNorm>("ln", 1e-5f), c);
  PositionEmbedding positions("wpe", PositionEmbeddingConfig{7, 0.02});
  compareLayer<CudaPositionEmbedding>(
      positions, std::make_unique<PositionEmbedding>("wpe", PositionEmbeddingConfig{7, 0.02}), c);
}

TEST_CASE("cuda: the token embedding gathers and scatters as the CPU's, repeated ids included") {
  const EmbeddingConfig cfg{50, 24, 0.02};
  Embedding proto("wte", cfg);
  Case c;
  c.input = Shape{9};
  c.batch = 6;
  c.tolerance = 1e-6;
  // Ids from a small range, so rows repeat within and across samples.
  c.make_input = [](const Shape& shape, std::mt19937& rng) {
    Tensor ids = Tensor::empty(shape);
    std::uniform_int_distribution<int> id(0, 12);
    for (int64_t i = 0; i < ids.numel(); ++i) ids.data()[i] = static_cast<float>(id(rng));
    return ids;
  };
  compareLayer<CudaEmbedding>(proto, std::make_unique<Embedding>("wte", cfg), c);
}

TEST_CASE("cuda: causal attention equals the CPU's for several heads, lengths and dropout") {
  struct Geometry {
    int64_t tokens, heads, head_dim;
    double dropout;
  };
  for (const Geometry& g : {Geometry{70, 2, 32, 0.0}, Geometry{45, 1, 64, 0.0}, Geometry{33, 2, 128, 0.0},
                            Geometry{70, 2, 32, 0.2}, Geometry{1, 3, 16, 0.0}}) {
    CAPTURE(g.tokens);
    CAPTURE(g.head_dim);
    CAPTURE(g.dropout);
    const CausalSelfAttentionConfig cfg{g.heads, g.dropout};
    CausalSelfAttention proto("attention", cfg);
    Case c;
    c.input = Shape{g.tokens, 3 * g.heads * g.head_dim};
    c.batch = 3;
    c.tolerance = 1e-4;
    compareLayer<CudaCausalSelfAttention>(proto, std::make_unique<CausalSelfAttention>("attention", cfg), c);
  }
}
