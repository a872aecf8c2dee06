#include "core/nn/cuda/cuda_dropout.h"

#include "core/backend/cuda/dropout_kernels.h"

namespace dtrain {

namespace {

// The key the CPU layer builds (Dropout::forward), so the masks agree.
ops::DropoutKey keyOf(const LayerContext& ctx) {
  return ops::DropoutKey{ctx.seed, ctx.layer_index, ctx.sample_offset, ctx.step_scalars};
}

}  // namespace

void CudaDropout::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  if (!ctx.training || rate_ == 0.0f) {
    Dropout::forward(in, out, ctx);  // the identity: a copy
    return;
  }
  cuda::dropoutForward(in[0]->raw(), out.raw(), in[0]->dtype(), in[0]->dim(0), elements_, rate_, keyOf(ctx),
                       ctx_.stream());
}

void CudaDropout::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                           const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (!din[0]) return;
  if (!ctx.training || rate_ == 0.0f) {
    Dropout::backward(in, out, dout, din, ctx);
    return;
  }
  cuda::dropoutBackward(dout.raw(), din[0]->raw(), in[0]->dtype(), dout.dim(0), elements_, rate_, keyOf(ctx),
                        ctx_.stream());
}

}  // namespace dtrain
