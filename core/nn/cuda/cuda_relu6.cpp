#include "core/nn/cuda/cuda_relu6.h"

#include "core/backend/cuda/clamp_kernels.h"

namespace dtrain {

// Through raw(): in a 16-bit precision the activations are bf16 or fp16.
void CudaRelu6::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  cuda::relu6Forward(in[0]->raw(), out.raw(), in[0]->dtype(), in[0]->numel(), ctx_.stream());
}

void CudaRelu6::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                         const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (din[0])
    cuda::relu6Backward(out.raw(), dout.raw(), din[0]->raw(), in[0]->dtype(), dout.numel(), ctx_.stream());
}

}  // namespace dtrain
