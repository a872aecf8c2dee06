#include "core/nn/cuda/cuda_add.h"

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/elementwise_kernels.h"
#include "core/backend/cuda/sum_kernels.h"

namespace dtrain {

void CudaAdd::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  if (in[0]->dtype() != DType::F32) {
    forward16(in, out);
    return;
  }
  const int64_t n = out.numel();
  cuda::sumOf(in[0]->data(), in[1]->data(), out.data(), n, ctx_.stream());
  for (size_t i = 2; i < in.size(); ++i) cuda::sumOf(out.data(), in[i]->data(), out.data(), n, ctx_.stream());
  if (relu_) cuda::reluForward(out.data(), out.data(), n, ctx_.stream());
  checkCuda(cudaGetLastError(), "launch the add layer's sum");
}

// One float sum over all the inputs, rounded once: a running sum kept in the
// 16-bit output would be rounded after every input.
void CudaAdd::forward16(const std::vector<const Tensor*>& in, Tensor& out) {
  const int64_t n = out.numel();
  inputs_16_.clear();
  for (const Tensor* t : in) inputs_16_.push_back(t->raw());
  const int count = static_cast<int>(inputs_16_.size());
  float* partial = count > cuda::kSumInputsPerPass ? partial_.floats(n, out.device()) : nullptr;
  cuda::sumOf(inputs_16_.data(), count, out.dtype(), out.raw(), n, relu_, partial, ctx_.stream());
  checkCuda(cudaGetLastError(), "launch the add layer's sum");
}

void CudaAdd::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                       const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const DType dtype = in[0]->dtype();
  const size_t bytes = dout.bytes();
  const void* grad = dout.raw();  // what every input receives
  for (Tensor* d : din) {
    if (!d || bytes == 0) continue;
    if (relu_ && grad == dout.raw()) {
      if (dtype == DType::F32)
        cuda::reluBackward(out.data(), dout.data(), d->data(), dout.numel(), ctx_.stream());
      else
        cuda::sumReluBackward(out.raw(), dout.raw(), d->raw(), dtype, dout.numel(), ctx_.stream());
      checkCuda(cudaGetLastError(), "launch the add layer's relu gradient");
    } else {
      checkCuda(cudaMemcpyAsync(d->raw(), grad, bytes, cudaMemcpyDeviceToDevice, ctx_.stream()),
                "copy the add layer's gradient");
    }
    grad = d->raw();
  }
}

}  // namespace dtrain
