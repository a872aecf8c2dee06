#include "core/backend/cuda/cublas_gemm.h"

#include <string>

#include "core/errors.h"

namespace dtrain {

namespace {

void checkCublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw DeviceError(std::string("cuBLAS: ") + what + ": " + cublasGetStatusString(status));
}

}  // namespace

CublasHandle::CublasHandle(cudaStream_t stream, bool allow_tf32, void* workspace, size_t workspace_bytes) {
  checkCublas(cublasCreate(&handle_), "create a handle");
  checkCublas(cublasSetStream(handle_, stream), "bind the handle to a stream");
  if (workspace)
    checkCublas(cublasSetWorkspace(handle_, workspace, workspace_bytes), "give the handle its workspace");
  checkCublas(cublasSetMathMode(handle_, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
              "set the math mode");
}

CublasHandle::~CublasHandle() {
  if (handle_) cublasDestroy(handle_);
}

void cublasGemm(const CublasHandle& handle, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  // cuBLAS is column-major: a row-major c[m,n] is a column-major c^T[n,m], and
  // c^T = op(b)^T * op(a)^T, so the operands swap places and keep their flags.
  checkCublas(
      cublasSgemm(handle.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                  static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
                  static_cast<int>(ldb), a, static_cast<int>(lda), &beta, c, static_cast<int>(ldc)),
      "sgemm");
}

}  // namespace dtrain
