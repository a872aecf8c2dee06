// Whole training steps on the GPU against the CPU: the shipped presets'
// forward, loss, backward and optimizer update through ReplicaSet, from the
// same initial weights and batches. fp32, TF32 off.
//
// Each step is compared on its own: the CPU takes the GPU's weights before
// it, and its optimizer takes the GPU's gradient. Two free-running trainings
// cannot be compared weight by weight under Adam: a weight whose gradient is
// rounding noise (|g| ~ 1e-9 where the largest is 1.65) moves by
// up to lr either way, so two correct runs end apart by a sizeable fraction
// of lr (two CPU runs differing only in their thread count: 6.3e-4 of the
// largest weight after three AdamW steps, though every gradient agrees to
// 1e-6; and the moved weights change the next gradients: by 1.2e-4 when the
// ~1000 noise-gradient weights are moved by 2 lr; see
// tests/optim/adam_rounding_test.cpp). Given the same inputs nothing
// amplifies: the gradients of the same weights agree to rounding, and so do
// the updates from the same weights, moments and gradients. The update check
// (1e-6) fails for a wrong beta1, beta2 or a missing bias correction by more
// than 100 times (tests/optim/adam_update_check_test.cpp); a kernel that lost
// its moments between steps fails it from step 2.
#include <doctest/doctest.h>

#include <random>

#include "core/backend/cuda/cuda_context.h"
#include "core/config/job_config.h"
#include "core/nn/layer_registry.h"
#include "core/optim/optimizer.h"
#include "core/train/replica_set.h"
#include "tests/common/random_batch.h"
#include "tests/cuda/device_compare.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// Three steps of `preset` with `optimizer` on both devices, each from the
// GPU's weights; compares each step's gradients, figures and updated weights.
void trainBoth(const std::string& preset, const std::string& optimizer, double dropout) {
  CudaContext::of(0).setTf32(false);
  ModelSection model;
  model.preset = preset;
  model.dropout = dropout;
  const Shape input{1, 28, 28};
  ReplicaSet cpu(model, input, 10, builtinLayers(), 1, 64);
  ReplicaSet gpu(model, input, 10, builtinLayers(), 1, 64, gpuDevice());
  cpu.store().initialize(7);
  gpu.store().initialize(7);
  REQUIRE(relativeError(gpu.store().params(), cpu.store().params()) == 0.0);

  OptimizerSection opt;
  opt.type = optimizer;
  opt.lr = optimizer == "sgd" ? 0.05 : 1e-3;
  opt.weight_decay = 1e-4;
  auto cpu_opt = makeOptimizer(opt);
  auto gpu_opt = makeOptimizer(opt);
  const int64_t n = cpu.store().size();
  cpu_opt->init(n);
  gpu_opt->init(n, gpuDevice());

  std::mt19937 rng(11);
  for (int step = 1; step <= 3; ++step) {
    CAPTURE(step);
    cpu.store().params().copyFrom(gpu.store().params());
    Batch batch = randomImageBatch(step == 3 ? 37 : 64, rng, /*pinned=*/true);  // a short last batch too
    const float scale = 1.0f / static_cast<float>(batch.size);
    BatchFigures want = cpu.trainStep(batch, 1000 + step, scale);
    gpu.trainStep(batch, 1000 + step, scale);
    CHECK(relativeError(gpu.grads(), cpu.grads()) < 1e-4);
    // Both optimizers update the same weights with the GPU's gradient; the
    // CPU's moments have seen the same gradients as the GPU's.
    const Tensor gpu_grads = gpu.grads().to(Device::cpu());
    const StepInfo info{opt.lr, step};
    cpu_opt->update(cpu.store().params().data(), gpu_grads.data(), 0, n, info);
    gpu_opt->update(gpu.store().params().data(), gpu.grads().data(), 0, n, info);
    CHECK(relativeError(gpu.store().params(), cpu.store().params()) < 1e-6);
    cpu.grads().zero();
    gpu.grads().zero();
    gpu.snapshotDeviceFigures();
    BatchFigures got = gpu.takeDeviceFigures();
    CHECK(got.samples == want.samples);
    CHECK(got.loss_sum == doctest::Approx(want.loss_sum).epsilon(1e-5));
    CHECK(got.correct == want.correct);
  }
  Batch eval = randomImageBatch(150, rng, /*pinned=*/true);  // larger than the capacity: evaluated in pieces
  BatchFigures want = cpu.evaluate(eval), got = gpu.evaluate(eval);
  CHECK(got.samples == 150);
  CHECK(got.loss_sum == doctest::Approx(want.loss_sum).epsilon(1e-4));
}

}  // namespace

TEST_CASE("cuda: the mlp preset trains on the GPU as on the CPU (sgd, dropout)") {
  trainBoth("mlp", "sgd", 0.2);
}

TEST_CASE("cuda: the cnn preset trains on the GPU as on the CPU (adam, adamw)") {
  trainBoth("cnn", "adam", 0.0);
  trainBoth("cnn", "adamw", 0.0);
}

TEST_CASE("cuda: device tensors copy, fill and add like host tensors; the allocator reuses blocks") {
  std::mt19937 rng(3);
  Tensor a = randomHost(Shape{1001}, rng), b = randomHost(Shape{1001}, rng);
  Tensor da = a.to(gpuDevice()), db = b.to(gpuDevice());
  da.add(db);
  for (int64_t i = 0; i < a.numel(); ++i) a.data()[i] += b.data()[i];
  CHECK(relativeError(da, a) == 0.0);
  da.fill(2.5f);
  Tensor back = da.to(Device::cpu());
  CHECK(back.data()[0] == 2.5f);
  CHECK(back.data()[1000] == 2.5f);
  CudaContext& ctx = CudaContext::of(0);
  const int64_t before = ctx.memoryStats().raw_allocations;
  for (int i = 0; i < 10; ++i) Tensor t = Tensor::empty(Shape{1 << 20}, gpuDevice());
  CHECK(ctx.memoryStats().raw_allocations <= before + 1);
}
