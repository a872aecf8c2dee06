// dense on a GPU: the CPU layer's configuration, shapes and parameters
// (core/nn/layers/dense.h), its three matrix products computed by cuBLASLt
// with algorithms timed once per shape (core/backend/cuda/cublaslt_gemm.h),
// bias and a fused relu by the backend's kernels, on the device's compute
// stream.
//
// In a 16-bit precision (bf16 or fp16 activations; Model binds the weight and
// bias as views of the activations' dtype, the gradients as fp32): the
// products multiply 16-bit factors with fp32 sums; the output and the input
// gradient are stored rounded to 16 bits, then the bias and relu are applied
// in float to the stored output and it is rounded again; the weight gradient
// is accumulated in fp32 straight into the fp32 gradient (cuBLASLt's fp32 C),
// the bias gradient summed in double from the 16-bit dY.
#pragma once
#include "core/backend/cuda/cublaslt_gemm.h"
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/gpu_layer_options.h"
#include "core/nn/layers/dense.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

class CudaDense : public Dense {
 public:
  CudaDense(const Dense& cpu, CudaContext& ctx, const GpuLayerOptions& options = {});

  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  // One call computes both on the device (the CPU layer's split is not inherited).
  bool splitsBackward() const override { return false; }
  // cuBLASLt's algorithm for each product chosen so far, with its time.
  std::string algorithmName(int64_t) const override { return gemm_.algorithms(); }

 private:
  // c = alpha op(a) op(b) + beta c, row-major, as cublasGemm; a and b of
  // `inputs`, c of `output`.
  void product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
               const void* b, int64_t ldb, float beta, void* c, int64_t ldc, DType inputs, DType output);
  // Throws DeviceError unless the bound weight (and bias) are of `dtype`.
  void checkParamsOf(DType dtype) const;

  CudaContext& ctx_;
  TunedGemm gemm_;
  Scratch masked_;  // dout masked by the fused relu, of dout's dtype
};

}  // namespace dtrain
