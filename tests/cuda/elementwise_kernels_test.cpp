// The CUDA bias, relu and scaling kernels against the CPU on fresh random
// inputs with odd sizes (and sizes past the grid-stride cap): bias + relu,
// relu and scale exactly equal; bias gradients within 1e-4 relative of the
// CPU's float sums and 1e-6 of an exact double sum, and bit-identical run to
// run; the sum of squares within 1e-9 relative of the CPU's.
#include "core/backend/cuda/elementwise_kernels.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/backend/cuda/cuda_memory.h"
#include "core/backend/ops.h"
#include "core/optim/grad_clip.h"
#include "core/util/rng.h"
#include "tests/cuda/device_array.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

std::vector<float> randomVector(size_t n, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

// Elements that differ in any bit (the inputs hold no NaN, so == is exact).
int64_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i)
    wrong += !(got[i] == want[i]) || std::signbit(got[i]) != std::signbit(want[i]);
  return wrong;
}

// max |got - want| / max(|want|, 1): relative, with values that cancel to
// near zero measured on the scale of their terms (inputs in [-1, 1]).
double worstRelative(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - want[i]) / std::max(std::fabs(want[i]), 1.0));
  return worst;
}

std::vector<double> widened(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// g = dy, or dy where relu_out > 0 (the CPU's reluBackward) when masked.
std::vector<float> maskedGrad(const std::vector<float>& dy, const std::vector<float>& relu_out, bool masked) {
  if (!masked) return dy;
  std::vector<float> g(dy.size());
  ops::reluBackward(relu_out.data(), dy.data(), g.data(), static_cast<int64_t>(dy.size()));
  return g;
}

}  // namespace

TEST_CASE("cuda: biasActRows and biasActPlanes equal the CPU exactly") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  Rng rng(11);
  // Shapes: odd, and one past 4096 blocks * 256 threads (each thread loops).
  struct Rows {
    int64_t rows, cols;
  };
  for (Rows s : {Rows{37, 131}, Rows{1, 7}, Rows{1031, 1237}}) {
    for (bool with_bias : {true, false})
      for (bool relu : {true, false}) {
        CAPTURE(s.rows);
        CAPTURE(s.cols);
        CAPTURE(with_bias);
        CAPTURE(relu);
        std::vector<float> y = randomVector(s.rows * s.cols, rng), bias = randomVector(s.cols, rng);
        DeviceArray<float> dy(memory, stream, y), dbias(memory, stream, bias);
        ops::biasActRows(y.data(), with_bias ? bias.data() : nullptr, s.rows, s.cols, relu);
        cuda::biasActRows(dy.get(), with_bias ? dbias.get() : nullptr, s.rows, s.cols, relu, stream.get());
        CHECK(mismatches(dy.download(), y) == 0);
      }
  }
  struct Planes {
    int64_t n, channels, plane;
  };
  for (Planes s : {Planes{3, 7, 29 * 31}, Planes{5, 17, 1}, Planes{2, 3, 7 * 7}, Planes{7, 33, 71 * 73}}) {
    for (bool with_bias : {true, false})
      for (bool relu : {true, false}) {
        CAPTURE(s.n);
        CAPTURE(s.channels);
        CAPTURE(s.plane);
        CAPTURE(with_bias);
        CAPTURE(relu);
        std::vector<float> y = randomVector(s.n * s.channels * s.plane, rng),
                           bias = randomVector(s.channels, rng);
        DeviceArray<float> dy(memory, stream, y), dbias(memory, stream, bias);
        // The CPU function takes one sample's planes at a time (bias index = plane index).
        for (int64_t i = 0; i < s.n; ++i)
          ops::biasActPlanes(y.data() + i * s.channels * s.plane, with_bias ? bias.data() : nullptr,
                             s.channels, s.plane, relu);
        cuda::biasActPlanes(dy.get(), with_bias ? dbias.get() : nullptr, s.n, s.channels, s.plane, relu,
                            stream.get());
        CHECK(mismatches(dy.download(), y) == 0);
      }
  }
}

TEST_CASE("cuda: relu forward and backward (also in place) and scale equal the CPU exactly") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  Rng rng(12);
  for (int64_t n : {int64_t(1), int64_t(100003), int64_t(1) << 21 | 5}) {
    CAPTURE(n);
    const std::vector<float> x = randomVector(n, rng), dy = randomVector(n, rng);
    std::vector<float> y(n), dx(n), scaled = x;
    ops::reluForward(x.data(), y.data(), n);
    ops::reluBackward(y.data(), dy.data(), dx.data(), n);
    for (float& v : scaled) v *= 0.3f;

    DeviceArray<float> d_x(memory, stream, x), d_y(memory, stream, static_cast<size_t>(n)),
        d_dy(memory, stream, dy), d_dx(memory, stream, static_cast<size_t>(n));
    cuda::reluForward(d_x.get(), d_y.get(), n, stream.get());
    CHECK(mismatches(d_y.download(), y) == 0);
    cuda::reluBackward(d_y.get(), d_dy.get(), d_dx.get(), n, stream.get());
    CHECK(mismatches(d_dx.download(), dx) == 0);
    cuda::reluBackward(d_y.get(), d_dy.get(), d_dy.get(), n, stream.get());  // dx aliases dy
    CHECK(mismatches(d_dy.download(), dx) == 0);
    cuda::reluForward(d_x.get(), d_x.get(), n, stream.get());  // in place
    CHECK(mismatches(d_x.download(), y) == 0);

    DeviceArray<float> d_s(memory, stream, x);
    cuda::scale(d_s.get(), n, 0.3f, stream.get());
    CHECK(mismatches(d_s.download(), scaled) == 0);
  }
}

TEST_CASE("cuda: biasGradRows equals the CPU within 1e-4 relative, with and without the relu mask") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  Rng rng(13);
  struct Rows {
    int64_t rows, cols;
  };
  // One slice of rows per column block, several (700 rows > 256), many columns.
  for (Rows s : {Rows{37, 131}, Rows{700, 45}, Rows{3, 1}, Rows{301, 2053}}) {
    for (bool masked : {false, true}) {
      CAPTURE(s.rows);
      CAPTURE(s.cols);
      CAPTURE(masked);
      const std::vector<float> dy = randomVector(s.rows * s.cols, rng),
                               relu_out = randomVector(s.rows * s.cols, rng),
                               start = randomVector(s.cols, rng);
      const std::vector<float> g = maskedGrad(dy, relu_out, masked);
      std::vector<float> cpu = start;
      ops::biasGradRows(g.data(), s.rows, s.cols, cpu.data());
      std::vector<double> exact = widened(start);
      for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t c = 0; c < s.cols; ++c) exact[c] += g[r * s.cols + c];

      DeviceArray<float> d_dy(memory, stream, dy), d_relu(memory, stream, relu_out),
          d_bias(memory, stream, start);
      cuda::biasGradRows(d_dy.get(), masked ? d_relu.get() : nullptr, s.rows, s.cols, d_bias.get(),
                         stream.get());
      const std::vector<float> got = d_bias.download();
      CHECK(worstRelative(got, widened(cpu)) < 1e-4);
      CHECK(worstRelative(got, exact) < 1e-6);

      // The same call again gives the same bits (no order-dependent atomics).
      DeviceArray<float> again(memory, stream, start);
      cuda::biasGradRows(d_dy.get(), masked ? d_relu.get() : nullptr, s.rows, s.cols, again.get(),
                         stream.get());
      CHECK(mismatches(again.download(), got) == 0);
    }
  }
}

TEST_CASE("cuda: biasGradPlanes equals the CPU within 1e-4 relative, with and without the relu mask") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  Rng rng(14);
  struct Planes {
    int64_t n, channels, plane;
  };
  // One slice per channel (small), several (37 * 1155 elements per channel), a 1-element plane, many
  // channels.
  for (Planes s :
       {Planes{3, 17, 7 * 7}, Planes{37, 5, 33 * 35}, Planes{601, 3, 1}, Planes{9, 301, 13 * 11}}) {
    for (bool masked : {false, true}) {
      CAPTURE(s.n);
      CAPTURE(s.channels);
      CAPTURE(s.plane);
      CAPTURE(masked);
      const int64_t total = s.n * s.channels * s.plane;
      const std::vector<float> dy = randomVector(total, rng), relu_out = randomVector(total, rng),
                               start = randomVector(s.channels, rng);
      const std::vector<float> g = maskedGrad(dy, relu_out, masked);
      std::vector<float> cpu = start;
      for (int64_t i = 0; i < s.n; ++i)
        ops::biasGradPlanes(g.data() + i * s.channels * s.plane, s.channels, s.plane, cpu.data());
      std::vector<double> exact = widened(start);
      for (int64_t k = 0; k < total; ++k) exact[(k / s.plane) % s.channels] += g[k];

      DeviceArray<float> d_dy(memory, stream, dy), d_relu(memory, stream, relu_out),
          d_bias(memory, stream, start);
      cuda::biasGradPlanes(d_dy.get(), masked ? d_relu.get() : nullptr, s.n, s.channels, s.plane,
                           d_bias.get(), stream.get());
      const std::vector<float> got = d_bias.download();
      CHECK(worstRelative(got, widened(cpu)) < 1e-4);
      CHECK(worstRelative(got, exact) < 1e-6);

      DeviceArray<float> again(memory, stream, start);
      cuda::biasGradPlanes(d_dy.get(), masked ? d_relu.get() : nullptr, s.n, s.channels, s.plane, again.get(),
                           stream.get());
      CHECK(mismatches(again.download(), got) == 0);
    }
  }
}

TEST_CASE("cuda: sumOfSquares equals the CPU within 1e-9 relative, and is deterministic") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  Rng rng(15);
  // One block, several slices, and far more elements than the slices' threads.
  for (int64_t n : {int64_t(1), int64_t(1001), int64_t(3000017)}) {
    CAPTURE(n);
    const std::vector<float> x = randomVector(n, rng, -3.0f, 3.0f);
    const double cpu = sumOfSquares(x.data(), 0, n);
    DeviceArray<float> d_x(memory, stream, x);
    DeviceArray<double> out(memory, stream, std::vector<double>{-1.0});
    cuda::sumOfSquares(d_x.get(), n, out.get(), stream.get());
    const double got = out.download()[0];
    CHECK(std::fabs(got - cpu) <= 1e-9 * cpu);
    cuda::sumOfSquares(d_x.get(), n, out.get(), stream.get());
    CHECK(out.download()[0] == got);
  }
  // No elements: writes 0 (it does not add).
  DeviceArray<double> out(memory, stream, std::vector<double>{5.0});
  cuda::sumOfSquares(nullptr, 0, out.get(), stream.get());
  CHECK(out.download()[0] == 0.0);
}
