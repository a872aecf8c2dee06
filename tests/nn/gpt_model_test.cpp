// The gpt preset as a whole model: its parameter gradients (the tied token
// table's summed from the embedding and the output layer) against finite
// differences of the model's loss, the store's layout with and without
// tying, and the errors of a tie that cannot hold.
//
// Step and tolerance: the model is smooth (layer norms, gelu, softmax), so
// central differences carry eps^2/6 * L''' besides the float round-off of
// the loss; with small weights (0.2) and eps = 1e-3 the truncation is below
// 1e-6, and the loss (110 outputs of O(1) times R, each output carrying the
// float rounding of a few hundred operations, ~1e-6 absolute in all) over
// 2 eps stays under 1e-3: the tolerance 3e-3 + 3e-3 |g| leaves margin while
// an indexing error shows as O(1).
#include <doctest/doctest.h>

#include <string>

#include "core/errors.h"
#include "core/nn/layer_registry.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"
#include "models/model_builder.h"
#include "nn_test_util.h"
#include "tests/common/layer_spec.h"
#include "tests/common/param_gradcheck.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

ModelSection tinyGpt(bool tie) {
  ModelSection m;
  m.preset = "gpt";
  m.blocks = 1;
  m.heads = 2;
  m.dim = 8;
  m.context = 6;
  m.tie_embeddings = tie;
  return m;
}

constexpr int64_t kVocab = 11, kTokens = 5;

}  // namespace

TEST_CASE("gpt: parameter gradients, the tied table's included, match finite differences of the loss") {
  for (bool tie : {true, false}) {
    CAPTURE(tie);
    auto model = buildModel(tinyGpt(tie), Shape{kTokens}, kVocab, builtinLayers());
    REQUIRE(model->outputShape() == Shape{kTokens, kVocab});
    ParamStore store;
    model->registerParams(store);
    store.allocate();
    Rng rng(5);
    for (size_t i = 0; i < store.entries().size(); ++i) {
      Tensor value = store.view(store.params(), i);
      const InitKind init = store.entries()[i].spec.init;
      rng.fill(value, 0.2f);
      if (init == InitKind::Ones)  // layer norm scales near one
        for (int64_t k = 0; k < value.numel(); ++k) value.data()[k] += 1.0f;
    }
    const int64_t batch = 2;
    Tensor grads = store.gradBuffer();
    model->bind(store, grads, batch);
    Tensor ids = Tensor::empty(Shape{batch, kTokens});
    for (int64_t i = 0; i < ids.numel(); ++i) ids.data()[i] = static_cast<float>((i * 7 + 3) % kVocab);
    Tensor r = Tensor::empty(Shape{batch, kTokens, kVocab});
    rng.fill(r);
    LayerContext ctx;
    auto loss = [&] { return dotLoss(model->forward(ids, ctx), r); };
    model->forward(ids, ctx);
    model->backward(ids, r, ctx);
    Tensor analytic = Tensor::empty(grads.shape());
    analytic.copyFrom(grads);
    const testing::ParamGradcheck g = testing::checkParamGradients(store, analytic, loss, 1e-3f, 3e-3, 3e-3);
    INFO(g.where);
    // Skipped: left and right differences apart by more than the tolerance,
    // from curvature (eps L'') or the float loss's round-off over 2 eps. A
    // wiring error (a tie's gradient not summed, a residual dropped) would
    // show in whole tensors, not in a few per cent of elements.
    CHECK(g.checked > 950);
    CHECK(g.skipped < (g.checked + g.skipped) / 20);
    CHECK(g.worst <= 1.0);
  }
}

TEST_CASE("gpt: a tied output layer owns no weight; untied, it has its own") {
  int64_t count[2] = {0, 0};
  for (bool tie : {true, false}) {
    CAPTURE(tie);
    auto model = buildModel(tinyGpt(tie), Shape{kTokens}, kVocab, builtinLayers());
    ParamStore store;
    model->registerParams(store);
    CHECK(store.find("wte.weight") != nullptr);
    CHECK((store.find("lm_head.weight") == nullptr) == tie);
    count[tie ? 1 : 0] = store.count();
  }
  CHECK(count[0] - count[1] == kVocab * 8);  // the [vocab, dim] table once instead of twice
}

TEST_CASE("gpt: a tie to a missing layer or a table of another shape is one error") {
  std::vector<LayerSpec> specs = {
      testing::layerSpec("wte", "embedding", {}, {{"vocab", int64_t{11}}, {"dim", int64_t{8}}}),
      testing::layerSpec("out", "dense", {}, {{"units", int64_t{11}}, {"tie", std::string("emb")}})};
  CHECK_THROWS_WITH_AS(
      Model(specs, Shape{4}, builtinLayers(), LayerDefaults{}),
      doctest::Contains("'out' ties its weight to 'emb', which is not a layer of this model"), ConfigError);
  specs[1] = testing::layerSpec("out", "dense", {}, {{"units", int64_t{12}}, {"tie", std::string("wte")}});
  CHECK_THROWS_WITH_AS(Model(specs, Shape{4}, builtinLayers(), LayerDefaults{}),
                       doctest::Contains("whose first parameter is [11,8], not the [12,8] it needs"),
                       ConfigError);
}
