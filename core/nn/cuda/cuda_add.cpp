#include "core/nn/cuda/cuda_add.h"

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/elementwise_kernels.h"
#include "core/backend/cuda/sum_kernels.h"

namespace dtrain {

void CudaAdd::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = out.numel();
  cuda::sumOf(in[0]->data(), in[1]->data(), out.data(), n, ctx_.stream());
  for (size_t i = 2; i < in.size(); ++i) cuda::sumOf(out.data(), in[i]->data(), out.data(), n, ctx_.stream());
  if (relu_) cuda::reluForward(out.data(), out.data(), n, ctx_.stream());
  checkCuda(cudaGetLastError(), "launch the add layer's sum");
}

void CudaAdd::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                       const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const size_t bytes = static_cast<size_t>(dout.numel()) * sizeof(float);
  const float* grad = dout.data();  // what every input receives
  for (Tensor* d : din) {
    if (!d || bytes == 0) continue;
    if (relu_ && grad == dout.data()) {
      cuda::reluBackward(out.data(), dout.data(), d->data(), dout.numel(), ctx_.stream());
      checkCuda(cudaGetLastError(), "launch the add layer's relu gradient");
    } else {
      checkCuda(cudaMemcpyAsync(d->data(), grad, bytes, cudaMemcpyDeviceToDevice, ctx_.stream()),
                "copy the add layer's gradient");
    }
    grad = d->data();
  }
}

}  // namespace dtrain
