#include "core/backend/cuda/cuda_dense.h"

#include "core/backend/cuda/elementwise_kernels.h"

namespace dtrain {

void CudaDense::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0), units = config_.units;
  cublasGemm(ctx_.cublas(), false, true, n, units, in_, 1.0f, in[0]->data(), in_, weight_.data(), in_, 0.0f,
             out.data(), units);
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
  cublasGemm(ctx_.cublas(), true, false, units, in_, n, 1.0f, dy, units, in[0]->data(), in_, 1.0f,
             dweight_.data(), in_);
  if (config_.bias) cuda::biasGradRows(dy, nullptr, n, units, dbias_.data(), ctx_.stream());
  if (din[0])
    cublasGemm(ctx_.cublas(), false, false, n, in_, units, 1.0f, dy, units, weight_.data(), in_, 0.0f,
               din[0]->data(), in_);
}

}  // namespace dtrain
