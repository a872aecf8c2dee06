#include "core/nn/cuda/cuda_relu.h"

#include "core/backend/cuda/elementwise_kernels.h"

namespace dtrain {

void CudaRelu::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  cuda::reluForward(in[0]->raw(), out.raw(), in[0]->dtype(), in[0]->numel(), ctx_.stream());
}

void CudaRelu::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                        const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (din[0])
    cuda::reluBackward(out.raw(), dout.raw(), din[0]->raw(), dout.dtype(), dout.numel(), ctx_.stream());
}

}  // namespace dtrain
