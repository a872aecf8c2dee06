#include "core/nn/cuda/cuda_conv2d.h"

#include <algorithm>
#include <string>

#include "core/backend/cuda/convert_kernels.h"
#include "core/backend/cuda/conv_layouts.h"
#include "core/backend/cuda/elementwise_kernels.h"
#include "core/errors.h"

namespace dtrain {

CudaConv2d::CudaConv2d(const Conv2d& cpu, CudaContext& ctx, const GpuLayerOptions& options)
    : Conv2d(cpu.name(), cpu.config()), ctx_(ctx), options_(options) {}

CudaConv2d::~CudaConv2d() = default;

ConvLayouts& CudaConv2d::conv(DType dtype) {
  if (weight_.dtype() != dtype || (config_.bias && bias_.dtype() != dtype))
    throw DeviceError(
        "conv2d '" + name() + "': " + dtypeName(dtype) + " activations with " + dtypeName(weight_.dtype()) +
        " parameters bound (a 16-bit layer reads its weight and bias in the activations' dtype)");
  // After setup(), which fixes a depthwise layer's filters and groups.
  if (!conv_ || conv_->dtype() != dtype) {
    ConvAlgoOptions algo;
    algo.dtype = dtype;
    algo.allow_tf32 = ctx_.tf32();
    algo.deterministic = options_.deterministic;
    algo.workspace_limit = options_.workspace_limit_bytes;
    algo.cache = options_.algorithms;
    conv_ = std::make_unique<ConvLayouts>(geom_, config_.filters, algo, config_.groups);
  }
  return *conv_;
}

std::string CudaConv2d::algorithmName(int64_t batch) const { return conv_ ? conv_->algorithms(batch) : ""; }

void CudaConv2d::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0);
  const DType t = in[0]->dtype();
  ConvLayouts& c = conv(t);
  ConvOperands operands;
  operands.x = in[0]->raw();
  operands.w = weight_.raw();
  operands.y = out.raw();
  c.choose(ctx_.cudnn(), ctx_.stream(), n, ConvPass::Forward, operands, ctx_.libraryMemory().scratch);
  const size_t ws_bytes = c.workspaceBytes(ctx_.cudnn(), n, ConvPass::Forward);
  c.forward(ctx_.cudnn(), ctx_.stream(), in[0]->raw(), weight_.raw(), out.raw(), n, ctx_.workspace(ws_bytes),
            ws_bytes);
  if (config_.bias || relu_)
    cuda::biasActPlanes(out.raw(), config_.bias ? bias_.raw() : nullptr, t, n, config_.filters,
                        geom_.outPlane(), relu_, ctx_.stream());
}

void CudaConv2d::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                          const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0);
  const DType t = dout.dtype();
  const void* dy = dout.raw();
  if (relu_) {
    void* m = masked_.elements(dout.numel(), t, dout.device());
    cuda::reluBackward(out.raw(), dy, m, t, dout.numel(), ctx_.stream());
    dy = m;
  }
  ConvLayouts& c = conv(t);
  const ScratchMemory scratch = ctx_.libraryMemory().scratch;
  ConvOperands operands;
  operands.x = in[0]->raw();
  operands.w = weight_.raw();
  operands.dy = dy;
  operands.dx = din[0] ? din[0]->raw() : nullptr;
  c.choose(ctx_.cudnn(), ctx_.stream(), n, ConvPass::BackwardFilter, operands, scratch);
  // The network's first layer needs no input gradient (din is null there).
  if (din[0]) c.choose(ctx_.cudnn(), ctx_.stream(), n, ConvPass::BackwardData, operands, scratch);
  const size_t ws_bytes = std::max(c.workspaceBytes(ctx_.cudnn(), n, ConvPass::BackwardFilter),
                                   din[0] ? c.workspaceBytes(ctx_.cudnn(), n, ConvPass::BackwardData) : 0);
  void* ws = ctx_.workspace(ws_bytes);
  if (config_.bias)
    cuda::biasGradPlanes(dy, nullptr, t, n, config_.filters, geom_.outPlane(), dbias_.data(), ctx_.stream());
  if (t == DType::F32) {
    c.backwardFilter(ctx_.cudnn(), ctx_.stream(), in[0]->raw(), dy, dweight_.data(), n, ws, ws_bytes,
                     /*accumulate=*/true);
  } else if (n > 0) {
    // cuDNN writes dw in the filter's 16-bit type: overwrite a scratch, then
    // add it to the fp32 gradient (see the header).
    void* dw = dweight16_.elements(dweight_.numel(), t, dweight_.device());
    c.backwardFilter(ctx_.cudnn(), ctx_.stream(), in[0]->raw(), dy, dw, n, ws, ws_bytes, /*accumulate=*/false);
    cuda::accumulateInto(dweight_.data(), dw, t, dweight_.numel(), ctx_.stream());
  }
  if (din[0]) c.backwardData(ctx_.cudnn(), ctx_.stream(), weight_.raw(), dy, din[0]->raw(), n, ws, ws_bytes);
}

}  // namespace dtrain
