// bf16 and fp16 on the GPU against the CPU's reference path
// (core/nn/precision.h): the same presets, weights and batches, a training
// step each from the same weights.
//
// Both store the same values at the same points (every layer's result and
// every activation gradient rounded to the format, the Product layers'
// weights rounded once per step, sums in fp32), so they differ only where
// the fp32 sums before a store (in another order on each device, ~1e-6
// apart) straddle a rounding boundary of the 16-bit format: such an element
// then differs by one unit in the last place, u = 2^-8 relative for bf16
// and 2^-11 for fp16, and passes that difference on to the layers after it.
// cuDNN also writes a convolution's weight gradient in the data's format
// (rounded once, u/2), and a product layer with a bias stores its product
// before adding the bias (one more rounding of each element, u/2; the CPU
// adds the bias inside its fp32 kernel). A normwise bound of one u per
// stored layer of the deepest path covers every element flipping at every
// store and the extra roundings; a kernel that
// forgot a rounding, read a weight in fp32 or mixed up the formats misses
// by far more (the formats' differences are 1-2^-8 apart in the scale of
// the values, and a missing rounding of a layer's result is u/2 per element
// in every element, where a flip is in a few).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "core/backend/cuda/convert_kernels.h"
#include "core/backend/cuda/cudnn_conv.h"
#include "core/backend/cuda/layout_kernels.h"
#include "core/backend/cuda/cuda_context.h"
#include "core/backend/cuda/optimizer_kernels.h"
#include "core/backend/ops.h"
#include "core/config/job_config.h"
#include "core/nn/layer_registry.h"
#include "core/train/replica_set.h"
#include "tests/common/random_batch.h"
#include "tests/cuda/device_compare.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

double unitRoundoff(Precision p) { return p == Precision::Fp16 ? 0x1p-11 : 0x1p-8; }

// One training step of `model` in `precision` on both devices from the same
// weights and batch; the gradients within `stored_layers` units of the format.
void stepBoth(const ModelSection& model, Precision precision, int stored_layers) {
  CudaContext::of(0).setTf32(false);
  const Shape input{1, 28, 28};
  ReplicaSet cpu(model, input, 10, builtinLayers(), 1, 32);
  ReplicaSet gpu(model, input, 10, builtinLayers(), 1, 32, gpuDevice());
  cpu.setPrecision(precision);
  gpu.setPrecision(precision);
  cpu.store().initialize(5);
  gpu.store().initialize(5);
  const double bound = stored_layers * unitRoundoff(precision);
  std::mt19937 rng(3);
  for (int step = 1; step <= 2; ++step) {
    CAPTURE(step);
    cpu.store().params().copyFrom(gpu.store().params());
    Batch batch = randomImageBatch(step == 2 ? 19 : 32, rng, /*pinned=*/true);
    // fp16's gradients are scaled as its loss scaler would, so they stay normal.
    const float scale = (precision == Precision::Fp16 ? 1024.0f : 1.0f) / static_cast<float>(batch.size);
    BatchFigures want = cpu.trainStep(batch, 50 + step, scale);
    gpu.trainStep(batch, 50 + step, scale);
    CHECK(relativeError(gpu.grads(), cpu.grads()) < bound);
    gpu.snapshotDeviceFigures();
    BatchFigures got = gpu.takeDeviceFigures();
    CHECK(got.samples == want.samples);
    CHECK(got.loss_sum == doctest::Approx(want.loss_sum).epsilon(bound));
    cpu.grads().zero();
    gpu.grads().zero();
  }
}

ModelSection preset(const std::string& name, int64_t depth = 20) {
  ModelSection m;
  m.preset = name;
  m.depth = depth;
  return m;
}

}  // namespace

TEST_CASE("cuda bf16 and fp16: the mlp's and the cnn's steps equal the CPU reference path within the format") {
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    CAPTURE(precisionName(p));
    stepBoth(preset("mlp"), p, 6);
    stepBoth(preset("cnn"), p, 10);
  }
}

TEST_CASE("cuda bf16: a ResNet's step (batch norm, residual adds, pooling) equals the CPU reference path") {
  stepBoth(preset("resnet", 8), Precision::Bf16, 20);
}

TEST_CASE("cuda bf16: activations and their gradients take half of fp32's memory") {
  ReplicaSet fp32(preset("cnn"), Shape{1, 28, 28}, 10, builtinLayers(), 1, 64, gpuDevice());
  ReplicaSet bf16(preset("cnn"), Shape{1, 28, 28}, 10, builtinLayers(), 1, 64, gpuDevice());
  bf16.setPrecision(Precision::Bf16);
  CHECK(bf16.model().activationBytes() * 2 == fp32.model().activationBytes());
}

TEST_CASE("cuda: the fused cast-and-update writes the 16-bit copy of the new weights, bit for bit") {
  const int64_t n = 1000;
  std::mt19937 rng(8);
  const Tensor p0 = randomHost(Shape{n}, rng, 2.0f), g = randomHost(Shape{n}, rng, 0.1f);
  for (DType dtype : {DType::BF16, DType::F16}) {
    CAPTURE(dtypeName(dtype));
    for (bool adam : {false, true}) {
      CAPTURE(adam);
      Tensor p = p0.to(gpuDevice()), dg = g.to(gpuDevice());
      Tensor m = Tensor::zeros(Shape{n}, gpuDevice()), v = Tensor::zeros(Shape{n}, gpuDevice());
      Tensor half = Tensor::zeros(Shape{n}, gpuDevice(), dtype);
      const cudaStream_t stream = CudaContext::of(0).stream();
      const HalfCopy copy{half.raw(), dtype};
      if (adam)
        cuda::adamUpdate(p.data(), dg.data(), m.data(), v.data(), n, 1e-2, 0.9, 0.999, 1e-8, 0.0, false, 1, stream,
                         copy);
      else
        cuda::sgdUpdate(p.data(), dg.data(), m.data(), n, 0.1, 0.9, false, 1e-4, stream, copy);
      const Tensor new_p = p.to(Device::cpu()), got = half.to(Device::cpu());
      std::vector<uint16_t> want(static_cast<size_t>(n));
      ops::encode16Bits(dtype == DType::F16 ? ops::HalfFormat::Fp16 : ops::HalfFormat::Bf16, new_p.data(),
                        want.data(), n);
      const auto* bits = static_cast<const uint16_t*>(got.raw());
      int64_t mismatches = 0;
      for (int64_t i = 0; i < n; ++i) mismatches += bits[i] != want[static_cast<size_t>(i)];
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("cuda: conversions between float and 16 bits round as the CPU's reference path") {
  const int64_t n = 4096;
  std::mt19937 rng(9);
  Tensor x = randomHost(Shape{n}, rng, 70000.0f);  // fp16's overflow and bf16's rounding both exercised
  for (int64_t i = 0; i < 64; ++i) x.data()[i] = std::ldexp(x.data()[i], -40);  // fp16 subnormals and zeros
  for (DType dtype : {DType::BF16, DType::F16}) {
    CAPTURE(dtypeName(dtype));
    const ops::HalfFormat format = dtype == DType::F16 ? ops::HalfFormat::Fp16 : ops::HalfFormat::Bf16;
    const Tensor dx = x.to(gpuDevice());
    Tensor half = Tensor::empty(Shape{n}, gpuDevice(), dtype);
    Tensor back = Tensor::empty(Shape{n}, gpuDevice());
    const cudaStream_t stream = CudaContext::of(0).stream();
    cuda::convert(dx.raw(), DType::F32, half.raw(), dtype, n, stream);
    cuda::convert(half.raw(), dtype, back.raw(), DType::F32, n, stream);
    Tensor want = Tensor::empty(Shape{n});
    ops::roundTo16Bits(format, x.data(), want.data(), n);
    const Tensor got = back.to(Device::cpu());
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i) mismatches += got.data()[i] != want.data()[i];
    CHECK(mismatches == 0);
  }
}

TEST_CASE("cuda: the layout transposition moves every element of every dtype to its place") {
  const int64_t batches = 3, rows = 37, cols = 70;  // tails on both tile edges
  std::mt19937 rng(12);
  const Tensor x = randomHost(Shape{batches, rows, cols}, rng);
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    CAPTURE(dtypeName(dtype));
    Tensor src = Tensor::empty(Shape{batches * rows * cols}, gpuDevice(), dtype);
    cuda::convert(x.to(gpuDevice()).raw(), DType::F32, src.raw(), dtype, src.numel(), CudaContext::of(0).stream());
    Tensor t = Tensor::empty(src.shape(), gpuDevice(), dtype), back = Tensor::empty(src.shape(), gpuDevice(), dtype);
    cuda::transposeLastTwo(src.raw(), t.raw(), dtype, batches, rows, cols, CudaContext::of(0).stream());
    cuda::transposeLastTwo(t.raw(), back.raw(), dtype, batches, cols, rows, CudaContext::of(0).stream());
    Tensor floats = Tensor::empty(src.shape(), gpuDevice());
    cuda::convert(t.raw(), dtype, floats.raw(), DType::F32, t.numel(), CudaContext::of(0).stream());
    const Tensor host_src = src.to(Device::cpu()), host_back = back.to(Device::cpu());
    const Tensor got = floats.to(Device::cpu());
    Tensor rounded = Tensor::empty(Shape{x.numel()});
    if (dtype == DType::F32)
      rounded.copyFrom(x.reshape(Shape{x.numel()}));
    else
      ops::roundTo16Bits(dtype == DType::F16 ? ops::HalfFormat::Fp16 : ops::HalfFormat::Bf16, x.data(),
                         rounded.data(), x.numel());
    int64_t wrong = 0;
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          wrong += got.data()[(b * cols + c) * rows + r] != rounded.data()[(b * rows + r) * cols + c];
    CHECK(wrong == 0);
    CHECK(std::memcmp(host_src.raw(), host_back.raw(), host_src.bytes()) == 0);
  }
}

TEST_CASE("cuda bf16: a convolution on channels-last copies computes what the NCHW one does") {
  // Both sum the same fp32 products in their kernels' orders, then round to
  // bf16: an element may differ by one unit (2^-8) where the two sums
  // straddle a rounding boundary; normwise that is at most 2^-8.
  const ops::Window2d geom{8, 12, 12, 3, 3, 1, 1, 1, 1};  // 8x12x12 input, 3x3 kernel, stride 1, padding 1
  const int64_t n = 4, filters = 16;
  ConvAlgoOptions nchw_options;
  nchw_options.dtype = DType::BF16;
  ConvAlgoOptions nhwc_options = nchw_options;
  nhwc_options.channels_last = true;
  CudnnConv nchw(geom, filters, nchw_options), nhwc(geom, filters, nhwc_options);
  std::mt19937 rng(13);
  auto bf16 = [](const Tensor& host) {
    Tensor t = Tensor::empty(Shape{host.numel()}, gpuDevice(), DType::BF16);
    cuda::convert(host.to(gpuDevice()).raw(), DType::F32, t.raw(), DType::BF16, host.numel(),
                  CudaContext::of(0).stream());
    return t;
  };
  const Tensor x = bf16(randomHost(Shape{n, 8, 12, 12}, rng)), w = bf16(randomHost(Shape{filters, 8, 3, 3}, rng));
  Tensor y = Tensor::empty(Shape{n * filters * 144}, gpuDevice(), DType::BF16);
  Tensor xt = Tensor::empty(x.shape(), gpuDevice(), DType::BF16), wt = Tensor::empty(w.shape(), gpuDevice(), DType::BF16);
  Tensor yt = Tensor::empty(y.shape(), gpuDevice(), DType::BF16), y_back = Tensor::empty(y.shape(), gpuDevice(), DType::BF16);
  CudaContext& ctx = CudaContext::of(0);
  cuda::transposeLastTwo(x.raw(), xt.raw(), DType::BF16, n, 8, 144, ctx.stream());
  cuda::transposeLastTwo(w.raw(), wt.raw(), DType::BF16, filters, 8, 9, ctx.stream());
  const size_t ws = std::max(nchw.workspaceBytes(ctx.cudnn(), n, ConvPass::Forward),
                             nhwc.workspaceBytes(ctx.cudnn(), n, ConvPass::Forward));
  nchw.forward(ctx.cudnn(), x.raw(), w.raw(), y.raw(), n, ctx.workspace(ws), ws);
  nhwc.forward(ctx.cudnn(), xt.raw(), wt.raw(), yt.raw(), n, ctx.workspace(ws), ws);
  cuda::transposeLastTwo(yt.raw(), y_back.raw(), DType::BF16, n, 144, filters, ctx.stream());
  Tensor a = Tensor::empty(Shape{y.numel()}, gpuDevice()), b = Tensor::empty(Shape{y.numel()}, gpuDevice());
  cuda::convert(y.raw(), DType::BF16, a.raw(), DType::F32, y.numel(), ctx.stream());
  cuda::convert(y_back.raw(), DType::BF16, b.raw(), DType::F32, y.numel(), ctx.stream());
  CHECK(relativeError(b, a.to(Device::cpu())) <= 0x1p-8);
}
