// Three training steps of the cnn preset on the CPU, recorded: the batches,
// seeds and optimizer settings of tests/cuda/cuda_training_test.cpp, so the
// rounding tests see the gradients that test sees. The compute thread count
// changes only the order of the gradient sums (each thread sums its slice of
// the batch, the slices are added in order): two correct runs whose
// gradients differ by float rounding alone.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/config/job_config.h"
#include "core/nn/layer_registry.h"
#include "core/optim/optimizer.h"
#include "core/train/replica_set.h"
#include "tests/common/random_batch.h"

namespace dtrain::testing {

struct CnnRun {
  std::vector<float> initial;             // the weights before step 1 (the same in every run)
  std::vector<std::vector<float>> grads;  // the gradient of each step
  std::vector<float> final;               // the weights after the last update
};

// The optimizer of the CUDA training test: lr 1e-3 (sgd 0.05), weight decay 1e-4.
inline OptimizerSection cnnOptimizer(const std::string& type) {
  OptimizerSection opt;
  opt.type = type;
  opt.lr = type == "sgd" ? 0.05 : 1e-3;
  opt.weight_decay = 1e-4;
  return opt;
}


// Called after each step's update with the run so far and the weights (n).
using AfterUpdate = std::function<void(int step, const CnnRun& run, float* params, int64_t n)>;

inline CnnRun trainCnn(int threads, const OptimizerSection& opt, const AfterUpdate& after_update = nullptr) {
  ModelSection model;
  model.preset = "cnn";
  ReplicaSet replicas(model, Shape{1, 28, 28}, 10, builtinLayers(), threads, 64);
  replicas.store().initialize(7);
  auto optimizer = makeOptimizer(opt);
  const int64_t n = replicas.store().size();
  optimizer->init(n);
  float* params = replicas.store().params().data();
  CnnRun run;
  run.initial.assign(params, params + n);
  std::mt19937 rng(11);
  for (int step = 1; step <= 3; ++step) {
    Batch batch = randomImageBatch(step == 3 ? 37 : 64, rng);
    replicas.trainStep(batch, 1000 + step, 1.0f / static_cast<float>(batch.size));
    replicas.sumGradients(0, n);
    const float* g = replicas.grads().data();
    run.grads.emplace_back(g, g + n);
    optimizer->update(params, g, 0, n, StepInfo{opt.lr, step});
    replicas.grads().zero();
    if (after_update) after_update(step, run, params, n);
  }
  run.final.assign(params, params + n);
  return run;
}

// max |got - want| / max |want|: the CUDA tests' normwise relative error.
template <class A, class B>
double normwiseError(const std::vector<A>& got, const std::vector<B>& want) {
  double diff = 0.0, scale = 1e-12;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return diff / scale;
}

}  // namespace dtrain::testing
