// The names under which measured GPU algorithm choices are kept
// (core/backend/algorithm_cache.h): everything that decides which algorithm
// is fastest and which are allowed, written out as one line of text. Two
// calls share a choice exactly when their keys are equal, so a field missing
// here would let a choice timed for one shape be used for another.
// Device-free: the CUDA module builds the keys, the engine stores them.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain {

enum class ConvPass { Forward, BackwardData, BackwardFilter };

// "fwd", "bwd-data", "bwd-filter".
const char* convPassName(ConvPass pass);

// One convolution pass on a batch: input [batch, channels, height, width],
// `filters` filters of kernel_h x kernel_w over channels/groups channels.
struct ConvAlgorithmKey {
  ConvPass pass = ConvPass::Forward;
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  int64_t filters = 0, kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t groups = 1;
  bool tf32 = false;           // TF32 kernels are candidates ([job] precision = "tf32")
  bool deterministic = false;  // only deterministic kernels are ([job] deterministic)
};

// "conv fwd n128 c32x14x14 f64 k3x3 s1x1 p1x1 g1 fp32 deterministic".
std::string algorithmKey(const ConvAlgorithmKey& key);

// One matrix product with the row-major meaning of core/backend/ops.h:
// c[m,n] = op(a)[m,k] op(b)[k,n] (+ c when `accumulate`), with leading
// dimensions lda, ldb, ldc and the byte alignment of each pointer (an
// algorithm that needs 16-byte aligned rows cannot serve 8-byte aligned ones).
struct GemmAlgorithmKey {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;
  int64_t align_a = 0, align_b = 0, align_c = 0;
  bool tf32 = false;
};

// "gemm nt m3136 n128 k1024 ld128/3136/3136 accumulate align256/256/64 fp32".
std::string algorithmKey(const GemmAlgorithmKey& key);

// The largest power of two dividing `address`, at most 256: the alignment a
// library may assume for a buffer starting there.
int64_t pointerAlignment(const void* address);

}  // namespace dtrain
