// gemm on the CPU. The AVX2 level calls OpenBLAS's cblas_sgemm (the Haswell
// kernels, core/backend/cpu/openblas_kernels.h); the AVX-512 levels call
// oneDNN's sgemm, whose 512-bit kernels run about twice as fast on CPUs that
// execute them at full width (this Debian's OpenBLAS either does not know
// such CPUs or is slower there). Both are pinned to the calling thread:
// parallelism comes from one replica per thread.
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include "core/backend/cpu/cpu_level.h"
#include "core/backend/cpu/gemm_levels.h"
#include "core/backend/ops.h"
#include "core/errors.h"

namespace dtrain::ops {

namespace {

void openblasGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void onednnGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // oneDNN sizes its OpenMP team by the calling thread's setting, whose
  // default is every core: each compute thread asks for itself alone, once.
  thread_local const bool alone = (omp_set_num_threads(1), true);
  (void)alone;
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    throw Error("oneDNN's sgemm failed (status " + std::to_string(static_cast<int>(status)) + ") on a " +
                std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " product");
}

}  // namespace

void gemmAtLevel(cpu::Level level, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    // BLAS would scale c by beta; keep that meaning without calling it.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  if (level == cpu::Level::Avx2)
    openblasGemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    onednnGemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  static const cpu::Level level = cpu::activeLevel();
  gemmAtLevel(level, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace dtrain::ops
