#include "core/nn/cuda/cuda_sequence_layers.h"

#include <cuda_runtime.h>

#include "core/backend/cuda/attention_kernels.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/elementwise_kernels.h"
#include "core/backend/cuda/sequence_kernels.h"
#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

namespace {

// Generation decodes on the CPU: a GPU layer asked to is a caller's error.
void refuseDecoding(const Layer& layer, const LayerContext& ctx) {
  if (ctx.decode_position >= 0)
    throw Error(layer_util::label(layer) + ": decoding one token at a time runs on the CPU");
}

}  // namespace

void CudaGelu::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  cuda::geluForward(in[0]->raw(), out.raw(), out.dtype(), out.numel(), ctx_.stream());
}

void CudaGelu::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                        const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (din[0])
    cuda::geluBackward(in[0]->raw(), dout.raw(), din[0]->raw(), dout.dtype(), dout.numel(), ctx_.stream());
}

void CudaLayerNorm::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t rows = in[0]->dim(0) * rows_per_sample_;
  float* stats = stats_.floats(2 * rows, in[0]->device());
  cuda::layerNormForward(in[0]->raw(), rows, cols_, weight_.data(), bias_.data(), eps_, out.raw(), stats,
                         stats + rows, in[0]->dtype(), ctx_.stream());
}

void CudaLayerNorm::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                             const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const int64_t rows = in[0]->dim(0) * rows_per_sample_;
  const float* stats = stats_.floats(2 * rows, in[0]->device());
  cuda::layerNormBackward(in[0]->raw(), dout.raw(), rows, cols_, weight_.data(), stats, stats + rows,
                          din[0] ? din[0]->raw() : nullptr, dweight_.data(), dbias_.data(), dout.dtype(),
                          ctx_.stream());
}

void CudaEmbedding::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  refuseDecoding(*this, ctx);
  if (table_.dtype() != out.dtype())
    throw DeviceError(layer_util::label(*this) + ": a table of " + dtypeName(table_.dtype()) + " for " +
                      dtypeName(out.dtype()) + " output");
  cuda::embeddingForward(in[0]->data(), in[0]->dim(0) * tokens_, table_.raw(), config_.dim, out.raw(),
                         out.dtype(), ctx_.stream());
}

void CudaEmbedding::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                             const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (din[0])  // ids have no gradient
    checkCuda(
        cudaMemsetAsync(din[0]->raw(), 0, din[0]->numel() * elementSize(din[0]->dtype()), ctx_.stream()),
        "clear an embedding's input gradient");
  if (ctx.backward_part == BackwardPart::Inputs) return;
  cuda::embeddingBackward(in[0]->data(), in[0]->dim(0) * tokens_, dout.raw(), config_.dim, config_.vocab,
                          dtable_.data(), dout.dtype(), ctx_.stream());
}

void CudaPositionEmbedding::forward(const std::vector<const Tensor*>& in, Tensor& out,
                                    const LayerContext& ctx) {
  refuseDecoding(*this, ctx);
  cuda::positionEmbeddingForward(in[0]->raw(), table_.data(), in[0]->dim(0), tokens_ * dim_, out.raw(),
                                 out.dtype(), ctx_.stream());
}

void CudaPositionEmbedding::backward(const std::vector<const Tensor*>& in, const Tensor& out,
                                     const Tensor& dout, const std::vector<Tensor*>& din,
                                     const LayerContext& ctx) {
  if (din[0] && din[0]->raw() != dout.raw()) din[0]->copyFrom(dout);
  if (ctx.backward_part == BackwardPart::Inputs) return;
  // The table's gradient: each position's row summed over the samples.
  cuda::biasGradRows(dout.raw(), nullptr, dout.dtype(), dout.dim(0), tokens_ * dim_, dtable_.data(),
                     ctx_.stream());
}

void CudaCausalSelfAttention::forward(const std::vector<const Tensor*>& in, Tensor& out,
                                      const LayerContext& ctx) {
  refuseDecoding(*this, ctx);
  const ops::AttentionShape s = shapeOf(*in[0]);
  cuda::causalAttentionForward(s, in[0]->raw(), out.raw(),
                               lse_.floats(s.batch * s.heads * s.seq, out.device()), dropoutOf(ctx),
                               out.dtype(), ctx_.stream());
}

void CudaCausalSelfAttention::backward(const std::vector<const Tensor*>& in, const Tensor& out,
                                       const Tensor& dout, const std::vector<Tensor*>& din,
                                       const LayerContext& ctx) {
  if (!din[0]) return;  // no parameters: nothing else to compute
  const ops::AttentionShape s = shapeOf(*in[0]);
  cuda::causalAttentionBackward(s, in[0]->raw(), out.raw(), dout.raw(),
                                lse_.floats(s.batch * s.heads * s.seq, out.device()), din[0]->raw(),
                                dropoutOf(ctx), dout.dtype(), ctx_.stream());
}

}  // namespace dtrain
