#include "core/nn/cuda/cuda_relu6.h"

#include "core/backend/cuda/clamp_kernels.h"

namespace dtrain {

void CudaRelu6::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  cuda::relu6Forward(in[0]->data(), out.data(), in[0]->numel(), ctx_.stream());
}

void CudaRelu6::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                         const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (din[0]) cuda::relu6Backward(out.data(), dout.data(), din[0]->data(), dout.numel(), ctx_.stream());
}

}  // namespace dtrain
