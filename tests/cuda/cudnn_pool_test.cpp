// cuDNN pooling against the CPU pooling of core/backend/ops.h on fresh random
// inputs and odd shapes: max pooling equal exactly (padded cases on all-negative
// inputs, where a zero padding would win), its gradient and average pooling
// within fp32 rounding; one CudnnPool serves two batch sizes.
#include "core/backend/cuda/cudnn_pool.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/backend/caching_allocator.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_handles.h"
#include "core/backend/cuda/cuda_memory.h"
#include "core/backend/cuda/cudnn_handle.h"
#include "core/backend/cuda/fill_kernels.h"
#include "core/backend/ops.h"
#include "core/errors.h"
#include "tests/cuda/device_array.h"

using namespace dtrain;
using dtrain::testing::DeviceArray;

namespace {

struct PoolCase {
  std::string name;
  ops::Window2d geom;
  float low, high;  // the input range
};

// channels, height, width, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w
std::vector<PoolCase> maxCases() {
  return {{"2x2 stride 2 on 11x11 (last row and column dropped)", {5, 11, 11, 2, 2, 2, 2, 0, 0}, -1.0f, 1.0f},
          {"3x3 stride 1 padding 1 (overlapping)", {5, 11, 11, 3, 3, 1, 1, 1, 1}, -1.0f, 1.0f},
          {"3x3 stride 2 padding 1, all inputs negative", {5, 11, 11, 3, 3, 2, 2, 1, 1}, -2.0f, -1.0f},
          {"3x2 stride 2x1 padding 1x1 on 11x9, all inputs negative",
           {5, 11, 9, 3, 2, 2, 1, 1, 1},
           -2.0f,
           -1.0f}};
}

std::vector<PoolCase> averageCases() {
  return {{"2x2 stride 2 on 11x11", {5, 11, 11, 2, 2, 2, 2, 0, 0}, -1.0f, 1.0f},
          {"3x3 stride 2 padding 1", {5, 11, 11, 3, 3, 2, 2, 1, 1}, -1.0f, 1.0f},
          {"3x2 stride 2x1 padding 1x1 on 11x9", {5, 11, 9, 3, 2, 2, 1, 1, 1}, -1.0f, 1.0f}};
}

std::vector<float> randomFloats(size_t count, float low, float high, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> v(count);
  for (float& f : v) f = uniform(rng);
  return v;
}

// The largest |got - expected| / (|expected| + 1).
double worstError(const std::vector<float>& got, const std::vector<float>& expected) {
  REQUIRE(got.size() == expected.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - expected[i]) / (std::fabs(double(expected[i])) + 1.0));
  return worst;
}

struct PoolRun {
  std::vector<float> y, dx;
};

// Forward and backward of a batch of n on the device; y and dx start from
// garbage, so both must be overwritten.
PoolRun runPool(CudnnPool& pool, const CudnnHandle& cudnn, CachingAllocator& memory, const CudaStream& stream,
                const std::vector<float>& x, const std::vector<float>& dy, int64_t n) {
  DeviceArray<float> x_dev(memory, stream, x.size()), dx_dev(memory, stream, x.size()),
      y_dev(memory, stream, dy.size()), dy_dev(memory, stream, dy.size());
  x_dev.upload(x);
  dy_dev.upload(dy);
  cuda::fill(y_dev.get(), static_cast<int64_t>(dy.size()), 1000.0f, stream.get());
  cuda::fill(dx_dev.get(), static_cast<int64_t>(x.size()), 1000.0f, stream.get());
  pool.forward(cudnn.get(), x_dev.get(), y_dev.get(), n);
  pool.backward(cudnn.get(), x_dev.get(), y_dev.get(), dy_dev.get(), dx_dev.get(), n);
  PoolRun run;
  run.y = y_dev.download();
  run.dx = dx_dev.download();
  return run;
}

}  // namespace

TEST_CASE("cuda: cuDNN max pooling equals the CPU's; padding never wins") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  CudnnHandle cudnn(stream.get());
  std::mt19937 rng(21);
  for (const PoolCase& c : maxCases()) {
    CAPTURE(c.name);
    const ops::Window2d& g = c.geom;
    CudnnPool pool(g, CudnnPool::Mode::Max);
    for (int64_t n : {3, 2}) {  // one instance, two batch sizes
      CAPTURE(n);
      const std::vector<float> x = randomFloats(n * g.channels * g.inPlane(), c.low, c.high, rng);
      const std::vector<float> dy = randomFloats(n * g.channels * g.outPlane(), -1.0f, 1.0f, rng);
      std::vector<float> y_cpu(dy.size()), dx_cpu(x.size());
      std::vector<int32_t> argmax(dy.size());
      ops::maxPoolForward(x.data(), n, g, y_cpu.data(), argmax.data());
      ops::maxPoolBackward(dy.data(), argmax.data(), n, g, dx_cpu.data());

      const PoolRun run = runPool(pool, cudnn, memory, stream, x, dy, n);
      int64_t differ = 0;  // a maximum is one of the inputs: equal bits
      for (size_t i = 0; i < run.y.size(); ++i) differ += run.y[i] != y_cpu[i];
      CHECK(differ == 0);
      CHECK(*std::max_element(run.y.begin(), run.y.end()) <= c.high);  // no zero from the padding
      CHECK(worstError(run.dx, dx_cpu) < 1e-5);
    }
  }
}

TEST_CASE("cuda: cuDNN average pooling equals the CPU's, padding counted as zeros") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  CudnnHandle cudnn(stream.get());
  std::mt19937 rng(22);
  for (const PoolCase& c : averageCases()) {
    CAPTURE(c.name);
    const ops::Window2d& g = c.geom;
    CudnnPool pool(g, CudnnPool::Mode::AverageIncludePad);
    for (int64_t n : {3, 2}) {
      CAPTURE(n);
      const std::vector<float> x = randomFloats(n * g.channels * g.inPlane(), c.low, c.high, rng);
      const std::vector<float> dy = randomFloats(n * g.channels * g.outPlane(), -1.0f, 1.0f, rng);
      std::vector<float> y_cpu(dy.size()), dx_cpu(x.size());
      ops::avgPoolForward(x.data(), n, g, y_cpu.data());
      ops::avgPoolBackward(dy.data(), n, g, dx_cpu.data());

      const PoolRun run = runPool(pool, cudnn, memory, stream, x, dy, n);
      CHECK(worstError(run.y, y_cpu) < 1e-5);
      CHECK(worstError(run.dx, dx_cpu) < 1e-5);
    }
  }
}

TEST_CASE("cuda: cuDNN max pooling on ties routes each window's gradient to one of its maxima") {
  // The CPU picks the first maximum; cuDNN promises only one of them. Either
  // way each window's gradient arrives whole at one input of that window.
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  CudnnHandle cudnn(stream.get());
  std::mt19937 rng(23);
  const ops::Window2d g{2, 8, 8, 2, 2, 2, 2, 0, 0};  // non-overlapping windows
  const int64_t n = 2, planes = n * g.channels;
  CudnnPool pool(g, CudnnPool::Mode::Max);
  const std::vector<float> x(planes * g.inPlane(), 0.5f);
  const std::vector<float> dy = randomFloats(planes * g.outPlane(), 1.0f, 2.0f, rng);
  const PoolRun run = runPool(pool, cudnn, memory, stream, x, dy, n);

  int64_t wrong_y = 0, wrong_windows = 0;
  for (float v : run.y) wrong_y += v != 0.5f;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < g.outHeight(); ++oy)
      for (int64_t ox = 0; ox < g.outWidth(); ++ox) {
        const float want = dy[(p * g.outHeight() + oy) * g.outWidth() + ox];
        int64_t whole = 0, other = 0;
        for (int64_t ky = 0; ky < 2; ++ky)
          for (int64_t kx = 0; kx < 2; ++kx) {
            const float v = run.dx[(p * g.height + 2 * oy + ky) * g.width + 2 * ox + kx];
            whole += v == want;
            other += v != want && v != 0.0f;
          }
        wrong_windows += !(whole == 1 && other == 0);
      }
  CHECK(wrong_y == 0);
  CHECK(wrong_windows == 0);
}

TEST_CASE("cuda: a pooling geometry the layers refuse is refused in words") {
  try {
    CudnnPool pool(ops::Window2d{5, 11, 11, 2, 2, 2, 2, 2, 2}, CudnnPool::Mode::Max);  // padding = the kernel
    FAIL("expected a ShapeError");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()).find("padding at most half the kernel") != std::string::npos);
  }
}
