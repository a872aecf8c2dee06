// Properties every optimizer must have, checked for each configuration the job
// file can ask for: range updates compose, ranges may run on threads at once,
// and a run continued from copied state is bitwise the uninterrupted run.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "core/errors.h"
#include "optim_test_util.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

std::vector<OptimizerSection> allConfigs() {
  std::vector<OptimizerSection> out;
  auto add = [&](const char* type, double momentum, bool nesterov, double wd) {
    OptimizerSection cfg = optimizerConfig(type, 0.05);
    cfg.momentum = momentum;
    cfg.nesterov = nesterov;
    cfg.weight_decay = wd;
    out.push_back(cfg);
  };
  add("sgd", 0.0, false, 0.0);
  add("sgd", 0.0, false, 1e-3);
  add("sgd", 0.9, false, 1e-3);
  add("sgd", 0.9, true, 1e-3);
  add("adam", 0.0, false, 0.0);
  add("adam", 0.0, false, 1e-2);
  add("adamw", 0.0, false, 1e-2);
  return out;
}

std::string describe(const OptimizerSection& c) {
  return c.type + " momentum=" + std::to_string(c.momentum) + " nesterov=" + std::to_string(c.nesterov) +
         " wd=" + std::to_string(c.weight_decay);
}

// Deterministic pseudo-random floats in [-1, 1).
std::vector<float> randomBuffer(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

bool bitwiseEqual(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

constexpr int64_t kN = 1003;  // odd, so ranges split off vector-width boundaries
constexpr int kSteps = 4;

}  // namespace

TEST_CASE("makeOptimizer builds each type and rejects unknown ones") {
  CHECK(makeOptimizer(optimizerConfig("sgd", 0.1))->name() == "sgd");
  CHECK(makeOptimizer(optimizerConfig("adam", 0.1))->name() == "adam");
  CHECK(makeOptimizer(optimizerConfig("adamw", 0.1))->name() == "adamw");
  try {
    makeOptimizer(optimizerConfig("rmsprop", 0.1));
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("rmsprop") != std::string::npos);
    CHECK(msg.find("sgd, adam, adamw") != std::string::npos);
  }
}

TEST_CASE("updating two disjoint ranges, on two threads, equals updating the whole") {
  for (const OptimizerSection& cfg : allConfigs()) {
    CAPTURE(describe(cfg));
    auto whole = makeOptimizer(cfg);
    auto split = makeOptimizer(cfg);
    whole->init(kN);
    split->init(kN);
    std::vector<float> p_whole = randomBuffer(kN, 1);
    std::vector<float> p_split = p_whole;
    for (int s = 1; s <= kSteps; ++s) {
      const std::vector<float> g = randomBuffer(kN, 100 + s);
      const StepInfo info{0.05, s};
      whole->update(p_whole.data(), g.data(), 0, kN, info);
      const int64_t mid = 517;
      std::thread a([&] { split->update(p_split.data(), g.data(), 0, mid, info); });
      std::thread b([&] { split->update(p_split.data(), g.data(), mid, kN, info); });
      a.join();
      b.join();
    }
    CHECK(bitwiseEqual(p_whole.data(), p_split.data(), kN));
    auto sw = whole->stateBuffers();
    auto ss = split->stateBuffers();
    REQUIRE(sw.size() == ss.size());
    for (size_t i = 0; i < sw.size(); ++i)
      CHECK(bitwiseEqual(sw[i].second->data(), ss[i].second->data(), kN));
  }
}

TEST_CASE("an update touches only its range") {
  for (const OptimizerSection& cfg : allConfigs()) {
    CAPTURE(describe(cfg));
    auto opt = makeOptimizer(cfg);
    opt->init(kN);
    std::vector<float> p = randomBuffer(kN, 2);
    const std::vector<float> before = p;
    const std::vector<float> g = randomBuffer(kN, 3);
    opt->update(p.data(), g.data(), 100, 200, StepInfo{0.05, 1});
    CHECK(bitwiseEqual(p.data(), before.data(), 100));
    CHECK(!bitwiseEqual(p.data() + 100, before.data() + 100, 100));
    CHECK(bitwiseEqual(p.data() + 200, before.data() + 200, kN - 200));
    for (auto& [name, t] : opt->stateBuffers()) {
      CAPTURE(name);
      for (int64_t i = 0; i < kN; ++i)
        if (i < 100 || i >= 200) REQUIRE(t->data()[i] == 0.0f);
    }
  }
}

TEST_CASE("continuing from copied state equals an uninterrupted run, bitwise") {
  for (const OptimizerSection& cfg : allConfigs()) {
    CAPTURE(describe(cfg));
    auto grads = [](int s) { return randomBuffer(kN, 200 + s); };

    auto uninterrupted = makeOptimizer(cfg);
    uninterrupted->init(kN);
    std::vector<float> p_full = randomBuffer(kN, 4);
    for (int s = 1; s <= kSteps; ++s)
      uninterrupted->update(p_full.data(), grads(s).data(), 0, kN, StepInfo{0.05, s});

    // Run half, then hand params and state to a fresh optimizer, as a checkpoint does.
    auto first = makeOptimizer(cfg);
    first->init(kN);
    std::vector<float> p = randomBuffer(kN, 4);
    for (int s = 1; s <= kSteps / 2; ++s) first->update(p.data(), grads(s).data(), 0, kN, StepInfo{0.05, s});
    auto resumed = makeOptimizer(cfg);
    resumed->init(kN);
    auto from = first->stateBuffers();
    auto to = resumed->stateBuffers();
    REQUIRE(from.size() == to.size());
    for (size_t i = 0; i < from.size(); ++i) {
      CHECK(from[i].first == to[i].first);
      to[i].second->copyFrom(*from[i].second);
    }
    first.reset();  // the resumed run must not depend on the original's memory
    for (int s = kSteps / 2 + 1; s <= kSteps; ++s)
      resumed->update(p.data(), grads(s).data(), 0, kN, StepInfo{0.05, s});

    CHECK(bitwiseEqual(p.data(), p_full.data(), kN));
  }
}

TEST_CASE("state buffers have the documented names and n elements") {
  struct Want {
    OptimizerSection cfg;
    std::vector<std::string> names;
  };
  OptimizerSection momentum = optimizerConfig("sgd", 0.1);
  momentum.momentum = 0.9;
  const std::vector<Want> wants = {{optimizerConfig("sgd", 0.1), {}},
                                   {momentum, {"momentum"}},
                                   {optimizerConfig("adam", 0.1), {"adam_m", "adam_v"}},
                                   {optimizerConfig("adamw", 0.1), {"adam_m", "adam_v"}}};
  for (const Want& w : wants) {
    CAPTURE(describe(w.cfg));
    auto opt = makeOptimizer(w.cfg);
    opt->init(kN);
    auto state = opt->stateBuffers();
    REQUIRE(state.size() == w.names.size());
    for (size_t i = 0; i < state.size(); ++i) {
      CHECK(state[i].first == w.names[i]);
      CHECK(state[i].second->numel() == kN);
    }
  }
}

TEST_CASE("an update outside the initialised size is an error") {
  for (const OptimizerSection& cfg : allConfigs()) {
    CAPTURE(describe(cfg));
    auto opt = makeOptimizer(cfg);
    opt->init(3);
    std::vector<float> p(4, 1.0f), g(4, 1.0f);
    CHECK_THROWS_AS(opt->update(p.data(), g.data(), 0, 4, StepInfo{0.1, 1}), Error);
    CHECK_THROWS_AS(opt->update(p.data(), g.data(), 2, 1, StepInfo{0.1, 1}), Error);
    CHECK_NOTHROW(opt->update(p.data(), g.data(), 1, 1, StepInfo{0.1, 1}));  // empty range
  }
}
