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

// A tensor's element type (core/tensor/tensor.h), declared rather than
// included so that this header, and the CUDA wrappers' that include it, do
// not bring Tensor and its Device into their readers. A key's DType{} is
// DType::F32 (the enumeration's zero; algorithm_keys.cpp checks it).
enum class DType : uint8_t;

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
  bool tf32 = false;           // TF32 kernels are candidates ([job] precision = "tf32"; fp32 data only)
  bool deterministic = false;  // only deterministic kernels are ([job] deterministic)
  DType data{};                // the type of x, w and y (and their gradients); F32
  bool channels_last = false;  // the tensors in NHWC, the filters [F, kh, kw, C/G]
};

// "conv fwd n128 c32x14x14 f64 k3x3 s1x1 p1x1 g1 fp32 deterministic"; the
// precision is "fp32" or "tf32" for fp32 data, else the data's "bf16" or
// "fp16" (keys of fp32 data read as they always have); " nhwc" at the end
// for channels-last tensors.
std::string algorithmKey(const ConvAlgorithmKey& key);

// One matrix product with the row-major meaning of core/backend/ops.h:
// c[m,n] = op(a)[m,k] op(b)[k,n] (+ c when `accumulate`), with leading
// dimensions lda, ldb, ldc and the byte alignment of each pointer (an
// algorithm that needs 16-byte aligned rows cannot serve 8-byte aligned ones),
// and the element types: of a and b (`inputs`), and of c (`output`: the
// inputs' type or, for 16-bit inputs, F32).
struct GemmAlgorithmKey {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;
  int64_t align_a = 0, align_b = 0, align_c = 0;
  bool tf32 = false;         // fp32 inputs only
  DType inputs{}, output{};  // F32
};

// "gemm nt m3136 n128 k1024 ld128/3136/3136 accumulate align256/256/64 fp32";
// for 16-bit inputs the precision is "bf16" or "fp16", followed by
// " out-fp32" when c is fp32 ("... align256/256/64 bf16 out-fp32").
std::string algorithmKey(const GemmAlgorithmKey& key);

// One batch_norm training step on a batch [batch, channels, plane] (plane =
// H*W, 1 for [C] samples): forward and backward together, since a path
// (core/nn/cuda/cuda_batch_norm.h) computes both. With its fused activation
// ("none", "relu", "relu6") and whether it adds a residual (a fused add),
// each an element pass of its own on one path and free on the other.
// Determinism is no field: both paths are deterministic (cuDNN's
// reproducibility list names no batch-normalisation routine).
struct BatchNormAlgorithmKey {
  int64_t batch = 0, channels = 0, plane = 1;
  std::string activation = "none";
  bool residual = false;
  DType data{};  // the activations' type; F32
};

// "batchnorm n128 c16 p1024 relu residual" ("plain" without the residual;
// " bf16" or " fp16" after it for 16-bit activations).
std::string algorithmKey(const BatchNormAlgorithmKey& key);

// The two ways a batch_norm training step is computed on a GPU, as an
// AlgorithmChoice's algo.
enum class BatchNormPath { Cudnn = 0, Own = 1 };
// "cudnn", "own".
const char* batchNormPathName(BatchNormPath path);

// The largest power of two dividing `address`, at most 256: the alignment a
// library may assume for a buffer starting there.
int64_t pointerAlignment(const void* address);

}  // namespace dtrain
