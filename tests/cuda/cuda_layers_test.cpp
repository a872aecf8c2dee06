// Every layer's CUDA version against its CPU version on fresh random inputs:
// forward output, input gradient and parameter gradients (accumulated onto
// non-zero values, as the layers' contract says). fp32 with TF32 off:
// normwise relative error below 1e-4 (1e-6 for the element-wise layers,
// whose results must be the same numbers).
#include <doctest/doctest.h>

#include <memory>
#include <random>

#include "core/backend/cuda/cuda_context.h"
#include "core/nn/cuda/cuda_conv2d.h"
#include "core/nn/cuda/cuda_dense.h"
#include "core/nn/cuda/cuda_dropout.h"
#include "core/nn/cuda/cuda_global_avg_pool.h"
#include "core/nn/cuda/cuda_pool.h"
#include "core/nn/cuda/cuda_relu.h"
#include "core/nn/layers/flatten.h"
#include "tests/common/conv_config.h"
#include "tests/cuda/device_compare.h"
#include "tests/cuda/layer_compare.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

PoolConfig pool(int64_t k, int64_t s, int64_t p) {
  PoolConfig c;
  c.kernel_h = c.kernel_w = k;
  c.stride_h = c.stride_w = s;
  c.pad_h = c.pad_w = p;
  return c;
}

}  // namespace

TEST_CASE("cuda: dense equals the CPU dense (bias, fused relu, no bias), 1e-4") {
  for (int variant = 0; variant < 3; ++variant) {
    CAPTURE(variant);
    DenseConfig cfg;
    cfg.units = 29;
    cfg.bias = variant != 2;
    Dense proto("fc", cfg);
    Case c;
    c.input = Shape{37};
    c.batch = 7;
    c.fuse_relu = variant == 1;
    compareLayer<CudaDense>(proto, std::make_unique<Dense>("fc", cfg), c);
  }
}

TEST_CASE("cuda: conv2d equals the CPU conv2d for several geometries, 1e-4") {
  const Conv2dConfig configs[] = {convConfig(7, 3, 3, 1, 1, 1, 1), convConfig(6, 5, 5, 2, 2, 2, 2),
                                  convConfig(4, 1, 1, 1, 1, 0, 0),
                                  convConfig(5, 3, 2, 2, 1, 1, 0, ConvAlgo::Auto, false)};
  for (size_t i = 0; i < std::size(configs); ++i) {
    for (bool relu : {false, true}) {
      CAPTURE(i);
      CAPTURE(relu);
      Conv2d proto("conv", configs[i]);
      Case c;
      c.input = Shape{5, 11, 11};
      c.batch = 3;
      c.fuse_relu = relu;
      compareLayer<CudaConv2d>(proto, std::make_unique<Conv2d>("conv", configs[i]), c);
    }
  }
}

TEST_CASE("cuda: the network's first conv2d skips the input gradient like the CPU one") {
  Conv2d proto("conv1", convConfig(8, 3, 3, 1, 1, 1, 1));
  Case c;
  c.input = Shape{1, 12, 12};
  c.batch = 4;
  c.input_gradient = false;
  compareLayer<CudaConv2d>(proto, std::make_unique<Conv2d>("conv1", convConfig(8, 3, 3, 1, 1, 1, 1)), c);
}

TEST_CASE("cuda: max_pool and avg_pool equal the CPU pools (with and without padding), 1e-6") {
  for (const PoolConfig& p : {pool(2, 2, 0), pool(3, 2, 1), pool(3, 1, 1)}) {
    CAPTURE(p.kernel_h);
    CAPTURE(p.pad_h);
    Case c;
    c.input = Shape{3, 9, 9};
    c.batch = 4;
    c.tolerance = 1e-6;
    MaxPool max_proto("pool", p);
    compareLayer<CudaMaxPool>(max_proto, std::make_unique<MaxPool>("pool", p), c);
    AvgPool avg_proto("pool", p);
    compareLayer<CudaAvgPool>(avg_proto, std::make_unique<AvgPool>("pool", p), c);
  }
}

TEST_CASE("cuda: global_avg_pool equals the CPU global_avg_pool, 1e-6") {
  GlobalAvgPool proto("gap");
  Case c;
  c.input = Shape{6, 7, 5};
  c.tolerance = 1e-6;
  compareLayer<CudaGlobalAvgPool>(proto, std::make_unique<GlobalAvgPool>("gap"), c);
}

TEST_CASE("cuda: relu equals the CPU relu exactly") {
  Relu proto("relu");
  Case c;
  c.input = Shape{3, 7, 5};
  c.tolerance = 1e-7;
  compareLayer<CudaRelu>(proto, std::make_unique<Relu>("relu"), c);
}

TEST_CASE("cuda: dropout drops the same elements as the CPU dropout, in training and at inference") {
  for (bool training : {true, false}) {
    CAPTURE(training);
    Dropout proto("drop", 0.3);
    Case c;
    c.input = Shape{131};
    c.batch = 9;
    c.training = training;
    c.tolerance = 1e-7;
    compareLayer<CudaDropout>(proto, std::make_unique<Dropout>("drop", 0.3), c);
  }
}

TEST_CASE("cuda: flatten copies on the GPU") {
  Flatten cpu("flat"), gpu_layer("flat");
  Case c;
  c.input = Shape{2, 3, 4};
  c.tolerance = 1e-9;
  compare(cpu, gpu_layer, c);
}
