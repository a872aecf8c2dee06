// AdamW's weight decay on some tensors only: the mask's pieces, the job's
// choice of tensors (matrices; 1-D tensors and embedding tables when asked),
// and an update that decays exactly the masked ranges.
#include "core/optim/decay_mask.h"

#include <doctest/doctest.h>

#include <tuple>

#include "core/nn/param_store.h"
#include "core/train/weight_decay_mask.h"
#include "optim_test_util.h"

using namespace dtrain;

namespace {

using Pieces = std::vector<std::tuple<int64_t, int64_t, bool>>;

Pieces piecesOf(const DecayMask& mask, int64_t begin, int64_t end) {
  Pieces out;
  mask.split(begin, end, [&](int64_t b, int64_t e, bool decays) { out.emplace_back(b, e, decays); });
  return out;
}

}  // namespace

TEST_CASE("decay mask: a range is cut at the masked ranges' edges") {
  const DecayMask mask = DecayMask::ranges({{2, 5}, {8, 9}});
  CHECK(piecesOf(mask, 0, 10) ==
        Pieces{{0, 2, false}, {2, 5, true}, {5, 8, false}, {8, 9, true}, {9, 10, false}});
  // A thread's chunk starting and ending inside ranges.
  CHECK(piecesOf(mask, 3, 8) == Pieces{{3, 5, true}, {5, 8, false}});
  CHECK(piecesOf(mask, 6, 7) == Pieces{{6, 7, false}});
  CHECK(piecesOf(DecayMask(), 4, 7) == Pieces{{4, 7, true}});
  // Flags and back, as a parameter server's shard receives them.
  const std::vector<float> flags = mask.flags(10);
  CHECK(flags == std::vector<float>{0, 0, 1, 1, 1, 0, 0, 0, 1, 0});
  CHECK(piecesOf(DecayMask::fromFlags(flags.data(), 10), 0, 10) == piecesOf(mask, 0, 10));
  const std::vector<float> ones(5, 1.0f);
  CHECK(DecayMask::fromFlags(ones.data(), 5).all());
  CHECK_THROWS(DecayMask::ranges({{4, 6}, {5, 8}}));
}

TEST_CASE("decay mask: adamw decays matrices; 1-D tensors and embedding tables only when the job says so") {
  ParamStore store;
  ParamSpec table{"weight", Shape{10, 4}, InitKind::Normal, 4, 4};
  table.embedding_table = true;
  store.add("wte", table);
  store.add("fc", ParamSpec{"weight", Shape{4, 4}, InitKind::Normal, 4, 4});
  store.add("fc", ParamSpec{"bias", Shape{4}, InitKind::Zeros, 4, 4});
  store.add("ln", ParamSpec{"weight", Shape{4}, InitKind::Ones, 4, 4});
  store.add("conv", ParamSpec{"weight", Shape{2, 1, 3, 3}, InitKind::HeNormal, 9, 18});
  auto decayed = [&](const OptimizerSection& cfg) {
    const DecayMask mask = weightDecayMask(store, cfg);
    std::vector<std::string> names;
    for (const ParamEntry& e : store.entries())
      if (mask.flags(store.size())[static_cast<size_t>(e.offset)] != 0.0f) names.push_back(e.name);
    return names;
  };
  OptimizerSection adamw;
  adamw.type = "adamw";
  CHECK(decayed(adamw) == std::vector<std::string>{"fc.weight", "conv.weight"});
  adamw.decay_1d = true;
  CHECK(decayed(adamw) == std::vector<std::string>{"fc.weight", "fc.bias", "ln.weight", "conv.weight"});
  adamw.decay_embeddings = true;
  CHECK(weightDecayMask(store, adamw).all());
  OptimizerSection sgd;  // L2 on every gradient
  CHECK(weightDecayMask(store, sgd).all());
}

TEST_CASE("decay mask: a masked adamw update is plain adamw on the masked ranges and decay-free elsewhere") {
  OptimizerSection cfg = testing::optimizerConfig("adamw", 0.1);
  cfg.weight_decay = 0.5;
  OptimizerSection free_cfg = cfg;
  free_cfg.weight_decay = 0.0;
  const int64_t n = 40;
  std::vector<float> p(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    p[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i % 7) - 0.3f;
    g[static_cast<size_t>(i)] = 0.05f * static_cast<float>(i % 5) - 0.1f;
  }
  std::vector<float> masked = p, decayed = p, free = p;
  auto masked_opt = makeOptimizer(cfg), decayed_opt = makeOptimizer(cfg), free_opt = makeOptimizer(free_cfg);
  for (auto* o : {masked_opt.get(), decayed_opt.get(), free_opt.get()}) o->init(n);
  const DecayMask mask = DecayMask::ranges({{0, 16}, {32, 40}});
  masked_opt->setDecayMask(mask);
  for (int64_t step = 1; step <= 3; ++step) {
    // In two chunks, as two threads would update them, one cutting a range.
    masked_opt->update(masked.data(), g.data(), 0, 10, StepInfo{cfg.lr, step});
    masked_opt->update(masked.data(), g.data(), 10, n, StepInfo{cfg.lr, step});
    decayed_opt->update(decayed.data(), g.data(), 0, n, StepInfo{cfg.lr, step});
    free_opt->update(free.data(), g.data(), 0, n, StepInfo{cfg.lr, step});
  }
  for (int64_t i = 0; i < n; ++i) {
    CAPTURE(i);
    const bool decays = i < 16 || i >= 32;
    // The same element operations in the same order: the same bits.
    CHECK(masked[static_cast<size_t>(i)] == (decays ? decayed : free)[static_cast<size_t>(i)]);
  }
  CHECK(decayed[20] != free[20]);  // the decay moves them
}
