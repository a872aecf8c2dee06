// add, concat and relu6 on the GPU against their CPU versions on fresh
// random inputs: forward output and every input gradient (a null one left
// alone). These layers only add, copy and clamp, so the results must be the
// same numbers. Then a small DAG with all three, built by the CUDA layer
// registry, against the same model on the CPU: output and parameter gradients
// (cuDNN convolutions and cuBLAS products: 1e-4).
#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/nn/cuda/cuda_add.h"
#include "core/nn/cuda/cuda_concat.h"
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/cuda/cuda_layers.h"
#include "core/nn/cuda/cuda_relu6.h"
#include "core/nn/layer_registry.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"
#include "tests/common/layer_spec.h"
#include "tests/cuda/device_compare.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

struct Case {
  std::vector<Shape> inputs;  // per sample
  int64_t batch = 5;
  float scale = 1.0f;          // inputs uniform in [-scale, scale]
  std::vector<bool> gradient;  // which inputs want one; empty = all
};

// Runs both layers on the same data and checks every result.
void compare(Layer& cpu, Layer& gpu, const Case& c) {
  CudaContext::of(0).setTf32(false);
  std::mt19937 rng(4321);
  const Shape out_shape = cpu.setup(c.inputs);
  REQUIRE(gpu.setup(c.inputs) == out_shape);
  REQUIRE(cpu.paramSpecs().empty());  // none of these layers has parameters to accumulate into

  LayerContext lc;
  std::vector<Tensor> x, x_gpu;
  for (const Shape& s : c.inputs) {
    x.push_back(randomHost(s.withBatch(c.batch), rng, c.scale));
    x_gpu.push_back(x.back().to(gpuDevice()));
  }
  std::vector<const Tensor*> in, in_gpu;
  for (size_t i = 0; i < x.size(); ++i) {
    in.push_back(&x[i]);
    in_gpu.push_back(&x_gpu[i]);
  }
  Tensor y = Tensor::empty(out_shape.withBatch(c.batch));
  Tensor y_gpu = Tensor::empty(out_shape.withBatch(c.batch), gpuDevice());
  y_gpu.fill(1e9f);  // every element must be written
  cpu.forward(in, y, lc);
  gpu.forward(in_gpu, y_gpu, lc);
  CHECK_MESSAGE(relativeError(y_gpu, y) == 0.0, cpu.type() << " forward");

  const Tensor g = randomHost(out_shape.withBatch(c.batch), rng);
  const Tensor g_gpu = g.to(gpuDevice());
  const float stale = 1e9f;  // input gradients are overwritten; unwanted ones untouched
  std::vector<Tensor> din, din_gpu;
  std::vector<Tensor*> dptr, dptr_gpu;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    din.push_back(Tensor::empty(c.inputs[i].withBatch(c.batch)));
    din_gpu.push_back(Tensor::empty(c.inputs[i].withBatch(c.batch), gpuDevice()));
    din.back().fill(stale);
    din_gpu.back().fill(stale);
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const bool wanted = c.gradient.empty() || c.gradient[i];
    dptr.push_back(wanted ? &din[i] : nullptr);
    dptr_gpu.push_back(wanted ? &din_gpu[i] : nullptr);
  }
  cpu.backward(in, y, g, dptr, lc);
  gpu.backward(in_gpu, y_gpu, g_gpu, dptr_gpu, lc);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    CAPTURE(i);
    const bool wanted = c.gradient.empty() || c.gradient[i];
    CHECK_MESSAGE(relativeError(din_gpu[i], din[i]) == 0.0, cpu.type() << " input gradient");
    if (!wanted) {
      const Tensor host = din_gpu[i].to(Device::cpu());
      CHECK(host.data()[0] == stale);
      CHECK(host.data()[host.numel() - 1] == stale);
    }
  }
}

LayerSpec spec(const std::string& name, const std::string& type, std::vector<std::string> inputs,
               std::initializer_list<std::pair<std::string, LayerOptions::Value>> options = {}) {
  return testing::layerSpec(name, type, std::move(inputs), options);
}

}  // namespace

TEST_CASE("cuda: add equals the CPU add, two and three inputs, a null gradient skipped") {
  for (size_t inputs : {2, 3}) {
    for (bool skip_one : {false, true}) {
      CAPTURE(inputs);
      CAPTURE(skip_one);
      Add cpu("sum");
      CudaAdd gpu(cpu, CudaContext::of(0));
      Case c;
      c.inputs.assign(inputs, Shape{4, 7, 5});
      if (skip_one) {
        c.gradient.assign(inputs, true);
        c.gradient[1] = false;
      }
      compare(cpu, gpu, c);
    }
  }
}

TEST_CASE("cuda: concat equals the CPU concat along every axis") {
  struct Axis {
    int64_t axis;
    std::vector<Shape> inputs;
  };
  const Axis cases[] = {
      {0, {Shape{3, 5, 6}, Shape{2, 5, 6}}}, {0, {Shape{1, 4, 4}, Shape{5, 4, 4}, Shape{2, 4, 4}}},
      {1, {Shape{3, 2, 6}, Shape{3, 5, 6}}}, {-1, {Shape{3, 5, 1}, Shape{3, 5, 6}}},
      {0, {Shape{37}, Shape{11}}},
  };
  for (const Axis& k : cases) {
    for (bool skip_first : {false, true}) {
      CAPTURE(k.axis);
      CAPTURE(k.inputs[0].str());
      CAPTURE(skip_first);
      Concat cpu("cat", k.axis);
      CudaConcat gpu(cpu, CudaContext::of(0));
      Case c;
      c.inputs = k.inputs;
      c.batch = 3;
      if (skip_first) {
        c.gradient.assign(k.inputs.size(), true);
        c.gradient[0] = false;
      }
      compare(cpu, gpu, c);
    }
  }
}

TEST_CASE("cuda: relu6 equals the CPU relu6 across both bounds") {
  Relu6 cpu("r6");
  CudaRelu6 gpu(cpu, CudaContext::of(0));
  Case c;
  c.inputs = {Shape{3, 17, 9}};  // not a multiple of a block
  c.scale = 8.0f;                // below 0, inside, above 6
  compare(cpu, gpu, c);
}

TEST_CASE("cuda: the registry's add, concat and relu6 compute a DAG like the CPU model") {
  // input [3,6,6] -> stem -> c1 -> relu6 -> add(c1r, stem) -> concat(sum, stem)
  // -> relu6 -> flatten -> dense 5: stem is read by three layers, so its
  // gradient is summed by the model through scratch memory on either device.
  const std::vector<LayerSpec> specs = {
      spec("stem", "conv2d", {"input"}, {{"filters", int64_t{4}}, {"padding", int64_t{1}}}),
      spec("c1", "conv2d", {"stem"}, {{"filters", int64_t{4}}, {"padding", int64_t{1}}}),
      spec("c1r", "relu6", {"c1"}),
      spec("sum", "add", {"c1r", "stem"}),
      spec("cat", "concat", {"sum", "stem"}),
      spec("act", "relu6", {"cat"}),
      spec("flat", "flatten", {"act"}),
      spec("fc", "dense", {"flat"}, {{"units", int64_t{5}}})};
  const Shape input{3, 6, 6};
  const int64_t batch = 4;
  CudaContext& ctx = CudaContext::of(0);
  ctx.setTf32(false);
  Model cpu(specs, input, builtinLayers(), LayerDefaults{});
  Model gpu(specs, input, cudaLayers(ctx), LayerDefaults{});
  ParamStore cpu_store, gpu_store;
  cpu.registerParams(cpu_store);
  gpu.registerParams(gpu_store);
  cpu_store.allocate();
  gpu_store.allocate(gpuDevice());
  cpu_store.initialize(5);
  gpu_store.initialize(5);
  Tensor cpu_grads = cpu_store.gradBuffer(), gpu_grads = gpu_store.gradBuffer();
  std::mt19937 rng(77);
  // Non-zero starting gradients: parameter gradients accumulate.
  const Tensor start = randomHost(cpu_grads.shape(), rng, 0.5f);
  cpu_grads.copyFrom(start);
  gpu_grads.copyFrom(start);
  cpu.bind(cpu_store, cpu_grads, batch);
  gpu.bind(gpu_store, gpu_grads, batch);

  const Tensor x = randomHost(input.withBatch(batch), rng, 2.0f);
  const Tensor x_gpu = x.to(gpuDevice());
  LayerContext lc;
  const Tensor& y = cpu.forward(x, lc);
  const Tensor& y_gpu = gpu.forward(x_gpu, lc);
  CHECK(relativeError(y_gpu, y) < 1e-4);
  const Tensor dy = randomHost(y.shape(), rng);
  const Tensor dy_gpu = dy.to(gpuDevice());
  cpu.backward(x, dy, lc);
  gpu.backward(x_gpu, dy_gpu, lc);
  for (size_t i = 0; i < cpu_store.entries().size(); ++i) {
    CAPTURE(cpu_store.entries()[i].name);
    CHECK(relativeError(gpu_store.view(gpu_grads, i), cpu_store.view(cpu_grads, i)) < 1e-4);
  }
}
