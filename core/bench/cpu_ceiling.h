// This CPU's ceilings, the figures the CPU benchmarks are read against: the
// peak rate of each level's arithmetic with every operand in registers, and
// the matrix products of a model alone, at its shapes, by each level's
// kernels. Everything runs on `threads` threads at once (one per core, as
// training runs), each timing its own copy; rates are the threads' sum.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

// c[m,n] = op(a) op(b), as ops::gemm computes it.
struct ProductShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  double flops() const { return 2.0 * m * n * k; }
};

// The products of one training step of a stack of dense layers at `batch`
// rows per thread: each layer's forward, input gradient and weight gradient
// (the first layer has no input gradient).
std::vector<ProductShape> denseStepProducts(const std::vector<int64_t>& widths, int64_t batch);

struct CpuCeiling {
  int threads = 1;
  // GFLOP/s with operands in registers; 0 where this CPU lacks the level.
  double fma256 = 0;    // 256-bit FMA (the AVX2 level)
  double fma512 = 0;    // 512-bit FMA (the AVX-512 levels)
  double dot_bf16 = 0;  // 512-bit bf16 pair dot products (AVX512-BF16)
  // Seconds for one pass over the shapes, by the AVX2 level's products
  // (OpenBLAS), the AVX-512 level's (oneDNN's fp32) and oneDNN's bf16
  // products (bf16 inputs, fp32 results); 0 where not run here.
  double step_avx2_s = 0, step_avx512_s = 0, step_bf16_s = 0;
  double step_flops = 0;
};

// Measures for about `seconds` per figure.
CpuCeiling measureCpuCeiling(const std::vector<ProductShape>& shapes, int threads, double seconds);

}  // namespace dtrain
