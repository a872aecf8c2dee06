// cuBLASLt products with timed algorithms against the CPU gemm on fresh
// random inputs: every transpose combination, odd sizes, a narrow layer's
// 8-byte aligned rows, beta 0, 1 (an accumulated gradient the search must not
// add into) and 2, fp32 (TF32 off): relative error < 1e-4. A second caller
// of the same shape takes the cached algorithm without timing, with the same
// bits. The cnn's dense weight gradient is timed against cublasSgemm.
#include "core/backend/cuda/cublaslt_gemm.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/backend/algorithm_cache.h"
#include "core/backend/caching_allocator.h"
#include "core/backend/cuda/cublas_gemm.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_handles.h"
#include "core/backend/cuda/cuda_memory.h"
#include "core/backend/cuda/median_time.h"
#include "core/backend/ops.h"
#include "tests/cuda/device_array.h"

using namespace dtrain;
using dtrain::testing::DeviceArray;

namespace {

struct Device {
  CachingAllocator memory{cudaRawAllocator(0)};
  CudaStream stream;
  CublasLtHandle lt;
  std::shared_ptr<void> workspace;
  size_t workspace_bytes = 0;

  LibraryMemory library() {
    return LibraryMemory{[this](size_t bytes) {
                           if (bytes > workspace_bytes) {
                             workspace = scratch(bytes);
                             workspace_bytes = bytes;
                           }
                           return workspace.get();
                         },
                         [this](size_t bytes) { return scratch(bytes); }};
  }
  std::shared_ptr<void> scratch(size_t bytes) {
    return std::shared_ptr<void>(memory.allocate(bytes), [this](void* p) { memory.release(p); });
  }
};

std::vector<float> randomFloats(size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& f : v) f = uniform(rng);
  return v;
}

double worstError(const std::vector<float>& got, const std::vector<float>& expected) {
  REQUIRE(got.size() == expected.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - expected[i]) / (std::fabs(double(expected[i])) + 1.0));
  return worst;
}

}  // namespace

TEST_CASE("cuda: timed cuBLASLt products equal the CPU gemm for every transpose, beta and odd sizes") {
  Device dev;
  TunedGemm gemm(GemmAlgoOptions{});
  std::mt19937 rng(21);
  const int64_t m = 37, n = 129, k = 300;
  for (float beta : {0.0f, 1.0f, 2.0f})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        CAPTURE(beta);
        CAPTURE(ta);
        CAPTURE(tb);
        const int64_t lda = ta ? m : k, ldb = tb ? k : n;
        const std::vector<float> a = randomFloats(m * k, rng), b = randomFloats(k * n, rng),
                                 c = randomFloats(m * n, rng);
        std::vector<float> expected = c;
        ops::gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, beta, expected.data(), n);
        DeviceArray<float> da(dev.memory, dev.stream, a), db(dev.memory, dev.stream, b),
            dc(dev.memory, dev.stream, c);
        gemm.run(dev.lt.get(), dev.stream.get(), ta, tb, m, n, k, 0.5f, da.get(), lda, db.get(), ldb, beta,
                 dc.get(), n, false, dev.library());
        CHECK(worstError(dc.download(), expected) < 1e-4);
      }
  // beta 1 and 2 share a key (accumulating), each transpose pair its own.
  CHECK(gemm.measurements() == 8);
  MESSAGE(gemm.algorithms());
}

TEST_CASE("cuda: a 10-unit layer's rows (8-byte aligned) and k = 0 are served") {
  Device dev;
  TunedGemm gemm(GemmAlgoOptions{});
  std::mt19937 rng(22);
  // fc2 of the cnn: out[n,10] = x[n,128] w[10,128]^T, its output rows 40 bytes apart.
  const int64_t n = 33, in = 128, units = 10;
  const std::vector<float> x = randomFloats(n * in, rng), w = randomFloats(units * in, rng);
  std::vector<float> expected(n * units, 0.0f);
  ops::gemm(false, true, n, units, in, 1.0f, x.data(), in, w.data(), in, 0.0f, expected.data(), units);
  // Offset by one row so c itself starts 8-byte aligned.
  DeviceArray<float> dx(dev.memory, dev.stream, x), dw(dev.memory, dev.stream, w),
      dc(dev.memory, dev.stream, (n + 1) * units + 2);
  float* c = dc.get() + 2;
  gemm.run(dev.lt.get(), dev.stream.get(), false, true, n, units, in, 1.0f, dx.get(), in, dw.get(), in, 0.0f,
           c, units, false, dev.library());
  std::vector<float> got = dc.download();
  got.erase(got.begin(), got.begin() + 2);
  got.resize(expected.size());
  CHECK(worstError(got, expected) < 1e-4);
  CHECK(gemm.algorithms().find("align256/256/8") != std::string::npos);

  // An empty batch: the accumulated gradient is left as it is, an overwritten output cleared.
  const std::vector<float> before = dc.download();
  gemm.run(dev.lt.get(), dev.stream.get(), true, false, units, in, 0, 1.0f, dx.get(), units, dw.get(), in,
           1.0f, dc.get(), in, false, dev.library());
  CHECK(dc.download() == before);
  gemm.run(dev.lt.get(), dev.stream.get(), false, true, 3, units, 0, 1.0f, dx.get(), in, dw.get(), in, 0.0f,
           dc.get(), units, false, dev.library());
  const std::vector<float> cleared = dc.download();
  CHECK(std::all_of(cleared.begin(), cleared.begin() + 3 * units, [](float v) { return v == 0.0f; }));
}

TEST_CASE("cuda: the cached product algorithm is taken without timing and gives the same bits") {
  Device dev;
  AlgorithmCache cache;
  cache.open(AlgorithmSource{"test GPU", 1, 1});
  GemmAlgoOptions options;
  options.cache = &cache;
  std::mt19937 rng(23);
  const int64_t m = 128, n = 392, k = 256;  // the shape of a weight gradient: dW[m,n] += dY^T[m,k] X[k,n]
  const std::vector<float> a = randomFloats(k * m, rng), b = randomFloats(k * n, rng),
                           c = randomFloats(m * n, rng);
  DeviceArray<float> da(dev.memory, dev.stream, a), db(dev.memory, dev.stream, b);
  std::vector<std::vector<float>> results;
  for (int caller = 0; caller < 2; ++caller) {
    TunedGemm gemm(options);
    DeviceArray<float> dc(dev.memory, dev.stream, c);
    gemm.run(dev.lt.get(), dev.stream.get(), true, false, m, n, k, 1.0f, da.get(), m, db.get(), n, 1.0f,
             dc.get(), n, false, dev.library());
    CHECK(gemm.measurements() == (caller == 0 ? 1 : 0));
    if (caller == 1) CHECK(gemm.algorithms().find("(cached, ") != std::string::npos);
    results.push_back(dc.download());
  }
  CHECK(cache.size() == 1);
  CHECK(results[0] == results[1]);
}

TEST_CASE("cuda: the cnn's dense weight gradient (batch 1024) against cublasSgemm's choice") {
  Device dev;
  TunedGemm gemm(GemmAlgoOptions{});
  CublasHandle blas(dev.stream.get(), false);
  std::mt19937 rng(24);
  // fc1: dW[128,3136] += dY^T[128,1024] X[1024,3136].
  const int64_t units = 128, in = 3136, batch = 1024;
  DeviceArray<float> dy(dev.memory, dev.stream, randomFloats(batch * units, rng)),
      x(dev.memory, dev.stream, randomFloats(batch * in, rng)), dw(dev.memory, dev.stream, units * in);
  auto tuned = [&] {
    gemm.run(dev.lt.get(), dev.stream.get(), true, false, units, in, batch, 1.0f, dy.get(), units, x.get(),
             in, 1.0f, dw.get(), in, false, dev.library());
    return true;
  };
  auto legacy = [&] {
    cublasGemm(blas, true, false, units, in, batch, 1.0f, dy.get(), units, x.get(), in, 1.0f, dw.get(), in);
    return true;
  };
  tuned();  // the search
  const double tuned_ms = medianMilliseconds(dev.stream.get(), 10, tuned);
  const double legacy_ms = medianMilliseconds(dev.stream.get(), 10, legacy);
  MESSAGE("fc1 weight gradient: cuBLASLt timed " << tuned_ms << " ms (" << gemm.algorithms()
                                                 << "), cublasSgemm " << legacy_ms << " ms");
  CHECK(tuned_ms > 0);
  WARN(tuned_ms <= legacy_ms * 1.05);
}
