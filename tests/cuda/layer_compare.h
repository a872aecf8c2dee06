// A layer's CUDA version against its CPU version on the same random data:
// forward output, input gradient and parameter gradients (accumulated onto
// non-zero values, as the layers' contract says), fp32 with TF32 off.
#pragma once
#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <random>

#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layer.h"
#include "tests/cuda/device_compare.h"

namespace dtrain::testing {

struct Case {
  Shape input;  // per sample
  int64_t batch = 5;
  double tolerance = 1e-4;
  bool training = true;
  bool input_gradient = true;
  bool fuse_relu = false;
  // The input's values: uniform in [-1, 1] unless given (token ids).
  std::function<Tensor(const Shape&, std::mt19937&)> make_input;
};

// Runs both layers on the same data and checks every result.
inline void compare(Layer& cpu, Layer& gpu, const Case& c) {
  CudaContext& ctx = CudaContext::of(0);
  ctx.setTf32(false);
  std::mt19937 rng(1234);
  const Shape out_shape = cpu.setup({c.input});
  REQUIRE(gpu.setup({c.input}) == out_shape);
  if (c.fuse_relu) {
    REQUIRE(cpu.fuseActivation("relu"));
    REQUIRE(gpu.fuseActivation("relu"));
  }
  std::vector<Tensor> params, grads, dparams, dgrads;
  for (const ParamSpec& spec : cpu.paramSpecs()) {
    params.push_back(randomHost(spec.shape, rng, 0.5f));
    grads.push_back(randomHost(spec.shape, rng, 0.5f));
    dparams.push_back(params.back().to(gpuDevice()));
    dgrads.push_back(grads.back().to(gpuDevice()));
  }
  cpu.bind(params, grads);
  gpu.bind(dparams, dgrads);

  LayerContext lc;
  lc.training = c.training;
  lc.seed = 99;
  lc.layer_index = 3;
  lc.sample_offset = 17;
  const Tensor x = c.make_input ? c.make_input(c.input.withBatch(c.batch), rng)
                                : randomHost(c.input.withBatch(c.batch), rng);
  const Tensor dx_gpu_in = x.to(gpuDevice());
  Tensor y = Tensor::empty(out_shape.withBatch(c.batch));
  Tensor dy_out = Tensor::empty(out_shape.withBatch(c.batch), gpuDevice());
  cpu.forward({&x}, y, lc);
  gpu.forward({&dx_gpu_in}, dy_out, lc);
  CHECK_MESSAGE(relativeError(dy_out, y) < c.tolerance, cpu.type() << " forward");

  const Tensor g = randomHost(out_shape.withBatch(c.batch), rng);
  const Tensor g_gpu = g.to(gpuDevice());
  Tensor din = Tensor::zeros(c.input.withBatch(c.batch));
  Tensor din_gpu = Tensor::zeros(c.input.withBatch(c.batch), gpuDevice());
  cpu.backward({&x}, y, g, {c.input_gradient ? &din : nullptr}, lc);
  gpu.backward({&dx_gpu_in}, dy_out, g_gpu, {c.input_gradient ? &din_gpu : nullptr}, lc);
  if (c.input_gradient)
    CHECK_MESSAGE(relativeError(din_gpu, din) < c.tolerance, cpu.type() << " input gradient");
  for (size_t i = 0; i < grads.size(); ++i)
    CHECK_MESSAGE(relativeError(dgrads[i], grads[i]) < c.tolerance, cpu.type()
                                                                        << " parameter gradient " << i);
}

template <typename Gpu, typename Cpu>
inline void compareLayer(Cpu& cpu_proto, std::unique_ptr<Cpu> cpu, const Case& c) {
  Gpu gpu(cpu_proto, CudaContext::of(0));
  compare(*cpu, gpu, c);
}

}  // namespace dtrain::testing
