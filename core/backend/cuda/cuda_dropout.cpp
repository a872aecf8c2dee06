#include "core/backend/cuda/cuda_dropout.h"

#include "core/backend/cuda/dropout_kernels.h"

namespace dtrain {

void CudaDropout::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  if (!ctx.training || rate_ == 0.0f) {
    out.copyFrom(*in[0]);
    return;
  }
  const ops::DropoutKey key{ctx.seed, ctx.layer_index, ctx.sample_offset};
  cuda::dropoutForward(in[0]->data(), out.data(), in[0]->dim(0), elements_, rate_, key, ctx_.stream());
}

void CudaDropout::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                           const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (!din[0]) return;
  if (!ctx.training || rate_ == 0.0f) {
    din[0]->copyFrom(dout);
    return;
  }
  const ops::DropoutKey key{ctx.seed, ctx.layer_index, ctx.sample_offset};
  cuda::dropoutBackward(dout.data(), din[0]->data(), dout.dim(0), elements_, rate_, key, ctx_.stream());
}

}  // namespace dtrain
