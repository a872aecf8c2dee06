// cuBLAS products against the CPU gemm on fresh random inputs, every
// transpose combination and odd sizes, fp32 (TF32 off): relative error < 1e-4.
#include "core/backend/cuda/cublas_gemm.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/backend/caching_allocator.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_handles.h"
#include "core/backend/cuda/cuda_memory.h"
#include "core/backend/ops.h"

using namespace dtrain;

TEST_CASE("cuda: cuBLAS gemm equals the CPU gemm for every transpose and odd sizes") {
  CachingAllocator memory(cudaRawAllocator(0));
  CudaStream stream;
  CublasHandle blas(stream.get(), false);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const int64_t m = 37, n = 129, k = 300;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      // Stored shapes: a is [m,k] or [k,m]; b is [k,n] or [n,k]; leading dimension = stored columns.
      const int64_t lda = ta ? m : k, ldb = tb ? k : n;
      std::vector<float> a(m * k), b(k * n), c(m * n), expected(m * n);
      for (float& v : a) v = uniform(rng);
      for (float& v : b) v = uniform(rng);
      for (float& v : c) v = uniform(rng);
      expected = c;
      ops::gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, expected.data(), n);

      auto upload = [&](const std::vector<float>& host) {
        auto* d = static_cast<float*>(memory.allocate(host.size() * sizeof(float)));
        checkCuda(cudaMemcpyAsync(d, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice,
                                  stream.get()),
                  "upload");
        return d;
      };
      float *da = upload(a), *db = upload(b), *dc = upload(c);
      cublasGemm(blas, ta, tb, m, n, k, 0.5f, da, lda, db, ldb, 2.0f, dc, n);
      std::vector<float> got(m * n);
      checkCuda(
          cudaMemcpyAsync(got.data(), dc, got.size() * sizeof(float), cudaMemcpyDeviceToHost, stream.get()),
          "download");
      stream.synchronize();
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i)
        worst =
            std::max(worst, std::fabs(double(got[i]) - expected[i]) / (std::fabs(double(expected[i])) + 1.0));
      CHECK(worst < 1e-4);
      memory.release(da);
      memory.release(db);
      memory.release(dc);
    }
}
