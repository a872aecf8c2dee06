// Grouped and depthwise conv2d on the GPU (cuDNN with a group count) against
// the CPU layer (grouped im2col, the depthwise kernels) on fresh random
// inputs: forward output, input gradient and parameter gradients (accumulated
// onto non-zero values), with bias, without, and with a fused relu. fp32 with
// TF32 off: normwise relative error below 1e-4.
#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/backend/cuda/cuda_context.h"
#include "core/nn/cuda/cuda_conv2d.h"
#include "core/nn/cuda/cuda_layers.h"
#include "core/nn/layers/depthwise_conv2d.h"
#include "tests/common/conv_config.h"
#include "tests/cuda/device_compare.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

Conv2dConfig grouped(int64_t filters, int64_t groups, int64_t stride, int64_t pad, int64_t kernel = 3,
                     bool bias = true) {
  Conv2dConfig c = convConfig(filters, kernel, kernel, stride, stride, pad, pad, ConvAlgo::Auto, bias);
  c.groups = groups;
  return c;
}

Conv2dConfig depthwise(int64_t multiplier, int64_t stride, int64_t pad, int64_t kernel = 3,
                       bool bias = true) {
  Conv2dConfig c = convConfig(0, kernel, kernel, stride, stride, pad, pad, ConvAlgo::Auto, bias);
  c.depth_multiplier = multiplier;
  return c;
}

std::unique_ptr<Conv2d> makeCpu(const Conv2dConfig& c) {
  if (c.depth_multiplier > 0) return std::make_unique<DepthwiseConv2d>("dw", c);
  return std::make_unique<Conv2d>("conv", c);
}

// Runs both layers on the same data and checks every result.
void compare(const Conv2dConfig& config, const Shape& input, int64_t batch, bool fuse_relu,
             bool input_gradient) {
  CudaContext& ctx = CudaContext::of(0);
  ctx.setTf32(false);
  std::unique_ptr<Conv2d> cpu = makeCpu(config);
  CudaConv2d gpu(*makeCpu(config), ctx);
  CHECK(gpu.type() == cpu->type());
  std::mt19937 rng(4321);
  const Shape out_shape = cpu->setup({input});
  REQUIRE(gpu.setup({input}) == out_shape);
  if (fuse_relu) {
    REQUIRE(cpu->fuseActivation("relu"));
    REQUIRE(gpu.fuseActivation("relu"));
  }
  std::vector<Tensor> params, grads, dparams, dgrads;
  for (const ParamSpec& spec : cpu->paramSpecs()) {
    params.push_back(randomHost(spec.shape, rng, 0.5f));
    grads.push_back(randomHost(spec.shape, rng, 0.5f));
    dparams.push_back(params.back().to(gpuDevice()));
    dgrads.push_back(grads.back().to(gpuDevice()));
  }
  cpu->bind(params, grads);
  gpu.bind(dparams, dgrads);

  LayerContext lc;
  const Tensor x = randomHost(input.withBatch(batch), rng);
  const Tensor x_gpu = x.to(gpuDevice());
  Tensor y = Tensor::empty(out_shape.withBatch(batch));
  Tensor y_gpu = Tensor::empty(out_shape.withBatch(batch), gpuDevice());
  cpu->forward({&x}, y, lc);
  gpu.forward({&x_gpu}, y_gpu, lc);
  CHECK_MESSAGE(relativeError(y_gpu, y) < 1e-4, "forward");

  const Tensor dy = randomHost(out_shape.withBatch(batch), rng);
  const Tensor dy_gpu = dy.to(gpuDevice());
  Tensor dx = Tensor::zeros(input.withBatch(batch));
  Tensor dx_gpu = Tensor::zeros(input.withBatch(batch), gpuDevice());
  cpu->backward({&x}, y, dy, {input_gradient ? &dx : nullptr}, lc);
  gpu.backward({&x_gpu}, y_gpu, dy_gpu, {input_gradient ? &dx_gpu : nullptr}, lc);
  if (input_gradient) CHECK_MESSAGE(relativeError(dx_gpu, dx) < 1e-4, "input gradient");
  for (size_t i = 0; i < grads.size(); ++i)
    CHECK_MESSAGE(relativeError(dgrads[i], grads[i]) < 1e-4, "parameter gradient " << i);
}

struct Case {
  std::string what;
  Shape input;
  Conv2dConfig config;
};

}  // namespace

TEST_CASE("cuda: grouped and depthwise conv2d equal the CPU layer (groups 1/2/4, multipliers 1/2), 1e-4") {
  const Case cases[] = {
      {"groups 1", Shape{4, 7, 9}, grouped(6, 1, 1, 1)},
      {"groups 2, stride 1, padding 1", Shape{4, 7, 9}, grouped(6, 2, 1, 1)},
      {"groups 2, stride 2, padding 0", Shape{4, 7, 9}, grouped(6, 2, 2, 0)},
      {"groups 4, stride 2, padding 1", Shape{8, 7, 9}, grouped(4, 4, 2, 1)},
      {"groups 4, pointwise", Shape{8, 7, 9}, grouped(12, 4, 1, 0, 1)},
      {"groups 2, no bias", Shape{4, 7, 9}, grouped(4, 2, 1, 1, 3, false)},
      {"depthwise x1, stride 1, padding 1", Shape{3, 7, 9}, depthwise(1, 1, 1)},
      {"depthwise x2, stride 1, padding 1", Shape{3, 7, 9}, depthwise(2, 1, 1)},
      {"depthwise x1, stride 2, padding 1", Shape{3, 7, 9}, depthwise(1, 2, 1)},
      {"depthwise x2, stride 2, padding 1", Shape{3, 9, 7}, depthwise(2, 2, 1)},
      {"depthwise x1, stride 1, padding 0", Shape{3, 7, 9}, depthwise(1, 1, 0)},
      {"depthwise x2, stride 2, padding 0", Shape{3, 7, 9}, depthwise(2, 2, 0)},
      {"depthwise x1, 5x5, stride 2, padding 2", Shape{2, 9, 7}, depthwise(1, 2, 2, 5)},
      {"depthwise x1, no bias", Shape{3, 7, 9}, depthwise(1, 2, 1, 3, false)},
      {"depthwise, MobileNet-sized planes", Shape{32, 24, 24}, depthwise(1, 2, 1)},
      {"conv2d groups = channels", Shape{4, 7, 9}, grouped(8, 4, 1, 1)},
  };
  for (const Case& c : cases)
    for (bool relu : {false, true}) {
      CAPTURE(c.what);
      CAPTURE(relu);
      compare(c.config, c.input, 3, relu, true);
    }
}

TEST_CASE("cuda: a depthwise first layer skips the input gradient like the CPU one") {
  compare(depthwise(2, 1, 1), Shape{3, 12, 12}, 4, false, false);
}

TEST_CASE("cuda: the GPU registry makes depthwise_conv2d a CudaConv2d") {
  CudaContext& ctx = CudaContext::of(0);
  LayerOptions options("dw", "depthwise_conv2d", SourcePos{"job.toml", 3, 1});
  options.set("depth_multiplier", int64_t{2}, SourcePos{"job.toml", 4, 1});
  options.set("padding", int64_t{1}, SourcePos{"job.toml", 5, 1});
  std::unique_ptr<Layer> layer = cudaLayers(ctx).create("depthwise_conv2d", "dw", options, LayerDefaults{});
  REQUIRE(dynamic_cast<CudaConv2d*>(layer.get()) != nullptr);
  CHECK(layer->type() == "depthwise_conv2d");
  CHECK(layer->setup({Shape{5, 8, 8}}) == Shape{10, 8, 8});
  CHECK(layer->paramSpecs()[0].shape == Shape{10, 1, 3, 3});
}
