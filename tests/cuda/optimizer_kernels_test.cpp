// The fused CUDA optimizer updates against the CPU optimizer classes
// (makeOptimizer) over 5 consecutive steps on fresh random parameters and
// gradients (an odd count), with a changing learning rate: parameters after
// every step and the state buffers after the last within 1e-5 relative.
#include "core/backend/cuda/optimizer_kernels.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/cuda/cuda_memory.h"
#include "core/errors.h"
#include "core/optim/optimizer.h"
#include "core/util/rng.h"
#include "tests/cuda/device_array.h"
#include "tests/optim/optim_test_util.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

constexpr int64_t kCount = 100003;
constexpr int kSteps = 5;

// max |got - want| / max(|want|, 0.01): relative, with values near zero (an
// update that cancels a parameter, a moment that changes sign) measured on
// the scale of the terms that produced them.
double worstRelative(const std::vector<float>& got, const float* want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / std::max(std::fabs(double(want[i])), 0.01));
  return worst;
}

std::vector<float> randomVector(int64_t n, Rng& rng) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

double lrAt(const OptimizerSection& cfg, int step) { return cfg.lr * (1.0 - 0.15 * (step - 1)); }

// Runs the CPU optimizer and the kernel side by side from the same start.
void compare(const OptimizerSection& cfg) {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  Rng rng(41);
  std::vector<float> params = randomVector(kCount, rng);
  auto cpu = makeOptimizer(cfg);
  cpu->init(kCount);
  const bool adam = cfg.type != "sgd";
  const bool momentum = !adam && cfg.momentum != 0.0;

  DeviceArray<float> d_params(memory, stream, params), d_grads(memory, stream, size_t(kCount));
  // Optimizer state starts at zero, as the CPU's init() makes it.
  DeviceArray<float> d_state0(memory, stream, size_t(kCount)), d_state1(memory, stream, size_t(kCount));
  for (int step = 1; step <= kSteps; ++step) {
    CAPTURE(step);
    const std::vector<float> grads = randomVector(kCount, rng);
    const double lr = lrAt(cfg, step);
    cpu->update(params.data(), grads.data(), 0, kCount, StepInfo{lr, step});
    d_grads.upload(grads);
    if (adam)
      cuda::adamUpdate(d_params.get(), d_grads.get(), d_state0.get(), d_state1.get(), kCount, lr, cfg.beta1,
                       cfg.beta2, cfg.eps, cfg.weight_decay, cfg.type == "adamw", step, stream.get());
    else
      cuda::sgdUpdate(d_params.get(), d_grads.get(), momentum ? d_state0.get() : nullptr, kCount, lr,
                      cfg.momentum, cfg.nesterov, cfg.weight_decay, stream.get());
    CHECK(worstRelative(d_params.download(), params.data()) < 1e-5);
  }
  const auto states = cpu->stateBuffers();
  REQUIRE(states.size() == (adam ? 2u : momentum ? 1u : 0u));
  const DeviceArray<float>* device_states[] = {&d_state0, &d_state1};
  for (size_t k = 0; k < states.size(); ++k) {
    CAPTURE(states[k].first);
    CHECK(worstRelative(device_states[k]->download(), states[k].second->data()) < 1e-5);
  }
}

}  // namespace

TEST_CASE("cuda: sgdUpdate equals the CPU Sgd over 5 steps within 1e-5 relative") {
  SUBCASE("plain") { compare(optimizerConfig("sgd", 0.1)); }
  SUBCASE("weight decay") {
    OptimizerSection cfg = optimizerConfig("sgd", 0.1);
    cfg.weight_decay = 0.01;
    compare(cfg);
  }
  SUBCASE("momentum") {
    OptimizerSection cfg = optimizerConfig("sgd", 0.05);
    cfg.momentum = 0.9;
    compare(cfg);
  }
  SUBCASE("nesterov momentum with weight decay") {
    OptimizerSection cfg = optimizerConfig("sgd", 0.05);
    cfg.momentum = 0.9;
    cfg.nesterov = true;
    cfg.weight_decay = 0.005;
    compare(cfg);
  }
}

TEST_CASE("cuda: adamUpdate equals the CPU Adam and AdamW over 5 steps within 1e-5 relative") {
  SUBCASE("adam") { compare(optimizerConfig("adam", 0.01)); }
  SUBCASE("adam with L2 weight decay") {
    OptimizerSection cfg = optimizerConfig("adam", 0.01);
    cfg.weight_decay = 0.05;
    compare(cfg);
  }
  SUBCASE("adamw") {
    OptimizerSection cfg = optimizerConfig("adamw", 0.01);
    cfg.weight_decay = 0.1;
    compare(cfg);
  }
  SUBCASE("adamw, other betas and eps") {
    OptimizerSection cfg = optimizerConfig("adamw", 0.003);
    cfg.beta1 = 0.8;
    cfg.beta2 = 0.99;
    cfg.eps = 1e-6;
    cfg.weight_decay = 0.01;
    compare(cfg);
  }
}

TEST_CASE("cuda: optimizer kernels refuse a missing momentum buffer and step 0") {
  try {
    cuda::sgdUpdate(nullptr, nullptr, nullptr, 10, 0.1, 0.9, false, 0.0, nullptr);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("momentum buffer") != std::string::npos);
  }
  try {
    cuda::adamUpdate(nullptr, nullptr, nullptr, nullptr, 10, 0.1, 0.9, 0.999, 1e-8, 0.0, false, 0, nullptr);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("step must be >= 1") != std::string::npos);
  }
}
