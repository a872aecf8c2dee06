// cuDNN convolution against a direct reference convolution (accumulated in
// double) on fresh random inputs and odd shapes, full fp32 math: forward,
// input gradient and (accumulated) weight gradient within relative error 1e-4.
// Algorithms are chosen once per batch size, each size with its own: by
// heuristics, or by timing on the passes' own buffers, which must leave the
// accumulated weight gradient untouched and be taken from the cache by the
// next layer of the same shape without timing again.
#include "core/backend/cuda/cudnn_conv.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/backend/algorithm_cache.h"
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

constexpr size_t kWorkspaceLimit = size_t(256) << 20;

ConvAlgoOptions algoOptions(bool allow_tf32, size_t limit = kWorkspaceLimit, bool deterministic = true,
                            AlgorithmCache* cache = nullptr) {
  ConvAlgoOptions o;
  o.allow_tf32 = allow_tf32;
  o.deterministic = deterministic;
  o.workspace_limit = limit;
  o.cache = cache;
  return o;
}

struct ConvCase {
  std::string name;
  ops::Window2d geom;
  int64_t filters;
};

std::vector<ConvCase> oddCases() {
  // channels, height, width, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w
  return {{"3x3 stride 1 padding 1", {5, 11, 11, 3, 3, 1, 1, 1, 1}, 7},
          {"5x5 stride 2 padding 2", {5, 11, 11, 5, 5, 2, 2, 2, 2}, 7},
          {"1x1", {5, 11, 11, 1, 1, 1, 1, 0, 0}, 7},
          {"3x2 stride 2x1 padding 1x0 on 11x9", {5, 11, 9, 3, 2, 2, 1, 1, 0}, 7}};
}

std::vector<float> randomFloats(size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& f : v) f = uniform(rng);
  return v;
}

// The convolution by its definition, in double: y = conv(x, w); dx and dw are
// the gradients of sum(y * dy).
struct Reference {
  std::vector<double> y, dx, dw;
};

Reference referenceConv(const std::vector<float>& x, const std::vector<float>& w,
                        const std::vector<float>& dy, int64_t n, const ops::Window2d& g, int64_t filters) {
  const int64_t c_in = g.channels, ho = g.outHeight(), wo = g.outWidth();
  Reference r;
  r.y.assign(n * filters * ho * wo, 0.0);
  r.dx.assign(n * c_in * g.height * g.width, 0.0);
  r.dw.assign(filters * c_in * g.kernel_h * g.kernel_w, 0.0);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t f = 0; f < filters; ++f)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          const int64_t out = ((s * filters + f) * ho + oy) * wo + ox;
          for (int64_t c = 0; c < c_in; ++c)
            for (int64_t ky = 0; ky < g.kernel_h; ++ky)
              for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
                const int64_t iy = oy * g.stride_h - g.pad_h + ky, ix = ox * g.stride_w - g.pad_w + kx;
                if (iy < 0 || iy >= g.height || ix < 0 || ix >= g.width) continue;
                const int64_t in = ((s * c_in + c) * g.height + iy) * g.width + ix;
                const int64_t wi = ((f * c_in + c) * g.kernel_h + ky) * g.kernel_w + kx;
                r.y[out] += double(w[wi]) * x[in];
                r.dx[in] += double(w[wi]) * dy[out];
                r.dw[wi] += double(x[in]) * dy[out];
              }
        }
  return r;
}

// The largest |got - expected| / (|expected| + 1).
double worstError(const std::vector<float>& got, const std::vector<double>& expected) {
  REQUIRE(got.size() == expected.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - expected[i]) / (std::fabs(expected[i]) + 1.0));
  return worst;
}

struct PassErrors {
  double y = 0, dx = 0, dw = 0;
  std::vector<float> y_bits, dx_bits, dw_bits;  // the results, for bitwise comparisons
};

// Runs the three passes for a batch of n on fresh random data and returns
// their errors against the reference. y and dx start from garbage (they must
// be overwritten), dw from random values (it must accumulate). With
// `measure`, each pass's algorithm is first chosen by timing on its buffers.
PassErrors runPasses(CudnnConv& conv, const CudnnHandle& cudnn, CachingAllocator& memory,
                     const CudaStream& stream, const ops::Window2d& g, int64_t filters, int64_t n,
                     std::mt19937& rng, bool measure = false) {
  const size_t x_count = n * g.channels * g.inPlane(), y_count = n * filters * g.outPlane(),
               w_count = filters * g.channels * g.kernel_h * g.kernel_w;
  const std::vector<float> x = randomFloats(x_count, rng), w = randomFloats(w_count, rng),
                           dy = randomFloats(y_count, rng), dw_start = randomFloats(w_count, rng);
  Reference ref = referenceConv(x, w, dy, n, g, filters);
  for (size_t i = 0; i < w_count; ++i) ref.dw[i] += dw_start[i];

  DeviceArray<float> dx_dev(memory, stream, x_count), x_dev(memory, stream, x_count),
      w_dev(memory, stream, w_count), dw_dev(memory, stream, w_count), y_dev(memory, stream, y_count),
      dy_dev(memory, stream, y_count);
  x_dev.upload(x);
  w_dev.upload(w);
  dy_dev.upload(dy);
  dw_dev.upload(dw_start);
  cuda::fill(y_dev.get(), y_count, 1000.0f, stream.get());
  cuda::fill(dx_dev.get(), x_count, 1000.0f, stream.get());

  if (measure) {
    const ScratchMemory scratch = [&memory](size_t bytes) {
      return std::shared_ptr<void>(memory.allocate(bytes), [&memory](void* p) { memory.release(p); });
    };
    ConvOperands op;
    op.x = x_dev.get();
    op.w = w_dev.get();
    op.dy = dy_dev.get();
    op.y = y_dev.get();
    op.dx = dx_dev.get();
    for (ConvPass pass : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardFilter})
      conv.choose(cudnn.get(), n, pass, op, scratch);
  }
  const size_t ws_bytes = conv.workspaceBytes(cudnn.get(), n);
  void* ws = memory.allocate(ws_bytes);
  conv.forward(cudnn.get(), x_dev.get(), w_dev.get(), y_dev.get(), n, ws, ws_bytes);
  conv.backwardData(cudnn.get(), w_dev.get(), dy_dev.get(), dx_dev.get(), n, ws, ws_bytes);
  conv.backwardFilter(cudnn.get(), x_dev.get(), dy_dev.get(), dw_dev.get(), n, ws, ws_bytes);
  PassErrors e;
  e.y_bits = y_dev.download();
  e.dx_bits = dx_dev.download();
  e.dw_bits = dw_dev.download();
  e.y = worstError(e.y_bits, ref.y);
  e.dx = worstError(e.dx_bits, ref.dx);
  e.dw = worstError(e.dw_bits, ref.dw);
  memory.release(ws);
  return e;
}

}  // namespace

TEST_CASE("cuda: cuDNN convolution passes equal the reference convolution in fp32 for odd shapes") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  CudnnHandle cudnn(stream.get());
  std::mt19937 rng(11);
  const int64_t n = 3;
  for (const ConvCase& c : oddCases()) {
    CAPTURE(c.name);
    CudnnConv conv(c.geom, c.filters, algoOptions(false));
    const PassErrors e = runPasses(conv, cudnn, memory, stream, c.geom, c.filters, n, rng);
    CHECK(e.y < 1e-4);
    CHECK(e.dx < 1e-4);
    CHECK(e.dw < 1e-4);
    const std::string chosen = conv.algorithms(n);
    MESSAGE(c.name << ": " << chosen);
    CHECK(chosen.rfind("fwd ", 0) == 0);
    CHECK(chosen.find("TF32") == std::string::npos);  // full fp32 was asked for
  }
}

TEST_CASE("cuda: cuDNN convolution chooses algorithms once per batch size, each size its own") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  CudnnHandle cudnn(stream.get());
  std::mt19937 rng(12);
  const ConvCase c = oddCases()[0];
  CudnnConv conv(c.geom, c.filters, algoOptions(false));
  CHECK(conv.searches() == 0);
  CHECK(conv.algorithms(3) == "no algorithms chosen yet for batch 3");

  const size_t ws3 = conv.workspaceBytes(cudnn.get(), 3);
  const std::string algos3 = conv.algorithms(3);
  CHECK(conv.searches() == 1);
  CHECK(conv.workspaceBytes(cudnn.get(), 3) == ws3);
  CHECK(conv.algorithms(3) == algos3);
  CHECK(conv.searches() == 1);

  conv.workspaceBytes(cudnn.get(), 5);
  CHECK(conv.searches() == 2);
  CHECK(conv.algorithms(5).rfind("fwd ", 0) == 0);
  CHECK(conv.algorithms(3) == algos3);

  // Both sizes compute every sample of their own batch, alternating, with no further search.
  for (int64_t n : {3, 5, 3}) {
    CAPTURE(n);
    const PassErrors e = runPasses(conv, cudnn, memory, stream, c.geom, c.filters, n, rng);
    CHECK(e.y < 1e-4);
    CHECK(e.dx < 1e-4);
    CHECK(e.dw < 1e-4);
  }
  CHECK(conv.searches() == 2);
  CHECK(conv.workspaceBytes(cudnn.get(), 0) == 0);
  CHECK(conv.searches() == 2);
}

TEST_CASE("cuda: cuDNN convolution with TF32 allowed runs every pass close to fp32") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  CudnnHandle cudnn(stream.get());
  std::mt19937 rng(13);
  const ConvCase c = oddCases()[0];
  CudnnConv conv(c.geom, c.filters, algoOptions(true));
  // TF32 keeps 10 mantissa bits of each product's inputs: about 1e-3 relative.
  const PassErrors e = runPasses(conv, cudnn, memory, stream, c.geom, c.filters, 3, rng);
  CHECK(e.y < 2e-2);
  CHECK(e.dx < 2e-2);
  CHECK(e.dw < 2e-2);
  MESSAGE("TF32: " << conv.algorithms(3));
}

TEST_CASE("cuda: cuDNN convolution refuses a short workspace and names an unmet workspace limit") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  CudnnHandle cudnn(stream.get());
  const ConvCase c = oddCases()[1];
  CudnnConv conv(c.geom, c.filters, algoOptions(false));
  const size_t need = conv.workspaceBytes(cudnn.get(), 3, ConvPass::Forward);
  if (need > 0) {
    try {
      // Refused before any device pointer is used.
      conv.forward(cudnn.get(), nullptr, nullptr, nullptr, 3, nullptr, need - 1);
      FAIL("expected a short workspace to be refused");
    } catch (const DeviceError& e) {
      const std::string what = e.what();
      CHECK(what.find("is smaller than the " + std::to_string(need) + " bytes") != std::string::npos);
      CHECK(what.find(conv.describe()) != std::string::npos);
    }
  }

  // With no workspace at all, either every pass has a workspace-free
  // algorithm or the error names the limit and the layer.
  CudnnConv tight(c.geom, c.filters, algoOptions(false, 0));
  try {
    CHECK(tight.workspaceBytes(cudnn.get(), 3) == 0);
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    CHECK(what.find("fits the workspace limit of 0 bytes") != std::string::npos);
    CHECK(what.find(tight.describe()) != std::string::npos);
  }
  CHECK(conv.describe() == "conv 5x11x11 -> 7x6x6, kernel 5x5, stride 2x2, padding 2x2");
}

TEST_CASE("cuda: a geometry without output is refused in words") {
  ops::Window2d g{5, 3, 3, 5, 5, 1, 1, 0, 0};  // a 5x5 kernel over a 3x3 input
  try {
    CudnnConv conv(g, 7, algoOptions(false));
    FAIL("expected a ShapeError");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()).find("do not fit an input of 5x3x3") != std::string::npos);
  }
}

TEST_CASE("cuda: timed algorithms compute every pass correctly and leave the accumulated gradient alone") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  CudnnHandle cudnn(stream.get());
  std::mt19937 rng(14);
  for (bool deterministic : {true, false})
    for (const ConvCase& c : oddCases()) {
      CAPTURE(c.name);
      CAPTURE(deterministic);
      CudnnConv conv(c.geom, c.filters, algoOptions(false, kWorkspaceLimit, deterministic));
      // dw starts random: a search writing into it would break the sum.
      const PassErrors e = runPasses(conv, cudnn, memory, stream, c.geom, c.filters, 4, rng, true);
      CHECK(e.y < 1e-4);
      CHECK(e.dx < 1e-4);
      CHECK(e.dw < 1e-4);
      CHECK(conv.measurements() == 3);
      const std::string chosen = conv.algorithms(4);
      MESSAGE(c.name << (deterministic ? " (deterministic): " : ": ") << chosen);
      CHECK(chosen.find(" ms") != std::string::npos);
      CHECK(chosen.find("heuristic") == std::string::npos);
      CHECK(chosen.find("TF32") == std::string::npos);
      if (deterministic) CHECK(chosen.find("non-deterministic") == std::string::npos);
    }
}

TEST_CASE("cuda: a layer of the same shape takes the cached algorithms without timing, with the same bits") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  CudnnHandle cudnn(stream.get());
  AlgorithmCache cache;
  cache.open(AlgorithmSource{"test GPU", 1, 1});
  const ConvCase c = oddCases()[0];
  CudnnConv first(c.geom, c.filters, algoOptions(false, kWorkspaceLimit, true, &cache));
  std::mt19937 rng_a(15), rng_b(15);  // the same data for both
  const PassErrors a = runPasses(first, cudnn, memory, stream, c.geom, c.filters, 4, rng_a, true);
  CHECK(first.measurements() == 3);
  CHECK(cache.size() == 3);

  CudnnConv second(c.geom, c.filters, algoOptions(false, kWorkspaceLimit, true, &cache));
  const PassErrors b = runPasses(second, cudnn, memory, stream, c.geom, c.filters, 4, rng_b, true);
  CHECK(second.measurements() == 0);
  CHECK(second.algorithms(4).find("(cached, ") != std::string::npos);
  // Deterministic algorithms, the same ones: bit for bit the same results.
  CHECK(a.y_bits == b.y_bits);
  CHECK(a.dx_bits == b.dx_bits);
  CHECK(a.dw_bits == b.dw_bits);

  // Another batch size, or non-deterministic candidates, is another key: timed afresh.
  CudnnConv any(c.geom, c.filters, algoOptions(false, kWorkspaceLimit, false, &cache));
  std::mt19937 rng_c(16);
  runPasses(any, cudnn, memory, stream, c.geom, c.filters, 4, rng_c, true);
  CHECK(any.measurements() == 3);
  CHECK(cache.size() == 6);
}
