#include "core/nn/cuda/cuda_add.h"

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/elementwise_kernels.h"
#include "core/backend/cuda/sum_kernels.h"

namespace dtrain {

// One float sum over all the inputs in the CPU's order, with the fused relu,
// stored once (rounded once in 16 bits: a running sum kept in a 16-bit
// output would be rounded after every input).
void CudaAdd::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = out.numel();
  inputs_.clear();
  for (const Tensor* t : in) inputs_.push_back(t->raw());
  const int count = static_cast<int>(inputs_.size());
  float* partial = count > cuda::kSumInputsPerPass ? partial_.floats(n, out.device()) : nullptr;
  cuda::sumOf(inputs_.data(), count, out.dtype(), out.raw(), n, relu_, partial, ctx_.stream());
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
      cuda::reluBackward(out.raw(), dout.raw(), d->raw(), dtype, dout.numel(), ctx_.stream());
      checkCuda(cudaGetLastError(), "launch the add layer's relu gradient");
    } else {
      checkCuda(cudaMemcpyAsync(d->raw(), grad, bytes, cudaMemcpyDeviceToDevice, ctx_.stream()),
                "copy the add layer's gradient");
    }
    grad = d->raw();
  }
}

}  // namespace dtrain
