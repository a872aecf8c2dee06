// Matrix products through cuBLASLt, each shape's algorithm chosen by timing,
// with the row-major meaning of cublasGemm (core/backend/cuda/cublas_gemm.h).
//
// Why not cublasSgemm: its heuristic picks one kernel per shape with no
// workspace to split the reduction, and for a dense layer's weight gradient
// (a short, wide output with the batch as the reduction: the cnn's
// 128x3136 += [128x1024][1024x3136]) it picks a 32x32-tile FMA kernel that
// spreads the small output over enough blocks but runs at a few percent of
// the GPU's fp32 rate. cuBLASLt lists its candidates (split-K ones among
// them, which need a workspace), told the true alignment of each pointer;
// every one is timed once per shape (median of 3 runs after a warm-up, into a
// scratch output so an accumulated gradient is not touched) and the fastest
// kept, and recorded in the AlgorithmCache when there is one, so a resume
// takes it without timing. cuBLASLt's results are bitwise repeatable for a
// given algorithm on a given GPU (split-K's in-place reduction is ordered by
// counters, not atomics), so the choice, and the cache, is what repeatability
// needs.
//
// Element types: fp32 throughout, or (a 16-bit precision) bf16 or fp16 a and
// b with c either of that type (a layer's 16-bit result) or fp32 (a weight
// gradient accumulated into the fp32 gradient buffer); products are summed in
// fp32 either way (CUBLAS_COMPUTE_32F, fp32 alpha and beta), and a 16-bit c is
// rounded once, when stored. The types are part of a shape's key, so a choice
// timed for one is never taken for another.
//
// Ownership and threading: device pointers are the caller's; one instance is
// used by one thread. run() queues on `stream` and, apart from a search, does
// not synchronise.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/backend/algorithm_keys.h"
#include "core/backend/cuda/library_memory.h"

namespace dtrain {

class AlgorithmCache;

// Owns a cuBLASLt handle (one per device context).
class CublasLtHandle {
 public:
  CublasLtHandle();
  ~CublasLtHandle();
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;
  cublasLtHandle_t get() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

struct GemmAlgoOptions {
  size_t workspace_limit = size_t{1024} << 20;
  AlgorithmCache* cache = nullptr;  // shared; may be null
};

class TunedGemm {
 public:
  explicit TunedGemm(const GemmAlgoOptions& options);
  ~TunedGemm();
  TunedGemm(const TunedGemm&) = delete;
  TunedGemm& operator=(const TunedGemm&) = delete;

  // c[m,n] = alpha * op(a)[m,k] * op(b)[k,n] + beta * c, row-major, device
  // pointers, a and b holding elements of `inputs`, c of `output` (F32 with
  // F32 inputs; the inputs' type or F32 with BF16/F16 inputs; DeviceError
  // otherwise). Leading dimensions count elements. TF32 tensor cores only
  // when allow_tf32 and the inputs are F32 (16-bit inputs use the tensor
  // cores in any case, summing in fp32). The first call for a shape
  // (transposes, sizes, leading dimensions, beta zero or not, alignments,
  // element types, precision) chooses its algorithm, timing on a and b.
  // Throws DeviceError when cuBLASLt can run none.
  void run(cublasLtHandle_t handle, cudaStream_t stream, bool trans_a, bool trans_b, int64_t m, int64_t n,
           int64_t k, float alpha, const void* a, int64_t lda, const void* b, int64_t ldb, float beta,
           void* c, int64_t ldc, DType inputs, DType output, bool allow_tf32, const LibraryMemory& memory);
  // The same in fp32 throughout.
  void run(cublasLtHandle_t handle, cudaStream_t stream, bool trans_a, bool trans_b, int64_t m, int64_t n,
           int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
           float* c, int64_t ldc, bool allow_tf32, const LibraryMemory& memory);

  // "gemm nt m... fp32: algo 21 tile 18 split-K 4, 0.041 ms; ..." for every
  // shape chosen so far (its key, element types included), for logs.
  std::string algorithms() const;
  // How many shapes were timed on the GPU (not taken from the cache).
  int64_t measurements() const { return measurements_; }

 private:
  struct Plan;
  Plan& planFor(cublasLtHandle_t handle, cudaStream_t stream, const GemmAlgorithmKey& key, const void* a,
                const void* b, const LibraryMemory& memory);

  GemmAlgoOptions options_;
  std::map<std::string, std::unique_ptr<Plan>> plans_;  // by algorithmKey()
  int64_t measurements_ = 0;
};

}  // namespace dtrain
