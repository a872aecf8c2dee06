// Matrix products on the GPU through cuBLAS, with the CPU gemm's row-major
// meaning (core/backend/ops.h), so layers call both the same way.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace dtrain {

// Owns a cuBLAS handle bound to one stream. TF32 tensor-core math only when asked.
// Its workspace, when given, is the caller's (`workspace_bytes` of device
// memory that outlives the handle): else cuBLAS takes one of its own from the
// stream-ordered allocator, which a CUDA graph recording must not do.
class CublasHandle {
 public:
  CublasHandle(cudaStream_t stream, bool allow_tf32, void* workspace = nullptr, size_t workspace_bytes = 0);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// c[m,n] = alpha * op(a)[m,k] * op(b)[k,n] + beta * c, row-major, device pointers.
void cublasGemm(const CublasHandle& handle, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc);

}  // namespace dtrain
