#include "core/nn/cuda/cuda_dense.h"

#include "core/backend/cuda/elementwise_kernels.h"

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

void CudaDense::product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                        int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_.run(ctx_.cublasLt(), ctx_.stream(), trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc,
            ctx_.tf32(), ctx_.libraryMemory());
}

void CudaDense::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0), units = config_.units;
  product(false, true, n, units, in_, in[0]->data(), in_, weight_.data(), in_, 0.0f, out.data(), units);
  if (config_.bias || relu_)
    cuda::biasActRows(out.data(), config_.bias ? bias_.data() : nullptr, n, units, relu_, ctx_.stream());
}

void CudaDense::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                         const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0), units = config_.units;
  const float* dy = dout.data();
  if (relu_) {
    float* m = masked_.floats(n * units, out.device());
    cuda::reluBackward(out.data(), dy, m, n * units, ctx_.stream());
    dy = m;
  }
  // dW += dY^T X, db += column sums of dY, dX = dY W (as the CPU layer).
  // dW's product is the one with the short, wide output and the batch as
  // its reduction, where the choice of algorithm matters most.
  product(true, false, units, in_, n, dy, units, in[0]->data(), in_, 1.0f, dweight_.data(), in_);
  if (config_.bias) cuda::biasGradRows(dy, nullptr, n, units, dbias_.data(), ctx_.stream());
  if (din[0]) product(false, false, n, in_, units, dy, units, weight_.data(), in_, 0.0f, din[0]->data(), in_);
}

}  // namespace dtrain
