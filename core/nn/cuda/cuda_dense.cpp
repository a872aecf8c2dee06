#include "core/nn/cuda/cuda_dense.h"

#include <string>

#include "core/backend/cuda/elementwise_kernels.h"
#include "core/errors.h"

namespace dtrain {

namespace {

GemmAlgoOptions gemmOptions(const GpuLayerOptions& options) {
  GemmAlgoOptions gemm;
  gemm.workspace_limit = options.workspace_limit_bytes;
  gemm.cache = options.algorithms;
  return gemm;
}

}  // namespace

CudaDense::CudaDense(const Dense& cpu, CudaContext& ctx, const GpuLayerOptions& options)
    : Dense(cpu.name(), cpu.config()), ctx_(ctx), gemm_(gemmOptions(options)) {}

void CudaDense::product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
                        int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc,
                        DType inputs, DType output) {
  gemm_.run(ctx_.cublasLt(), ctx_.stream(), trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc,
            inputs, output, ctx_.tf32(), ctx_.libraryMemory());
}

void CudaDense::checkParamsOf(DType dtype) const {
  if (weight_.dtype() == dtype && (!config_.bias || bias_.dtype() == dtype)) return;
  throw DeviceError("dense '" + name() + "': " + dtypeName(dtype) + " activations with " +
                    dtypeName(weight_.dtype()) +
                    " parameters bound (a 16-bit layer reads its weight and bias "
                    "in the activations' dtype)");
}

void CudaDense::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0) * rows_per_sample_, units = config_.units;
  const DType t = in[0]->dtype();
  checkParamsOf(t);
  product(false, true, n, units, in_, in[0]->raw(), in_, weight_.raw(), in_, 0.0f, out.raw(), units, t, t);
  if (config_.bias || relu_)
    cuda::biasActRows(out.raw(), config_.bias ? bias_.raw() : nullptr, t, n, units, relu_, ctx_.stream());
}

void CudaDense::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                         const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0) * rows_per_sample_, units = config_.units;
  const DType t = dout.dtype();
  checkParamsOf(t);
  const void* dy = dout.raw();
  if (relu_) {
    void* m = masked_.elements(n * units, t, out.device());
    cuda::reluBackward(out.raw(), dy, m, t, n * units, ctx_.stream());
    dy = m;
  }
  // dW += dY^T X, db += column sums of dY, dX = dY W (as the CPU layer).
  // dW's product is the one with the short, wide output and the batch as
  // its reduction, where the choice of algorithm matters most. Its output is
  // the fp32 gradient whatever the activations' type.
  product(true, false, units, in_, n, dy, units, in[0]->raw(), in_, 1.0f, dweight_.data(), in_, t,
          DType::F32);
  if (config_.bias) cuda::biasGradRows(dy, nullptr, t, n, units, dbias_.data(), ctx_.stream());
  if (din[0])
    product(false, false, n, in_, units, dy, units, weight_.raw(), in_, 0.0f, din[0]->raw(), in_, t, t);
}

}  // namespace dtrain
