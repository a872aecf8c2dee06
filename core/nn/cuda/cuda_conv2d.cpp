#include "core/nn/cuda/cuda_conv2d.h"

#include <algorithm>

#include "core/backend/cuda/cudnn_conv.h"
#include "core/backend/cuda/elementwise_kernels.h"

namespace dtrain {

CudaConv2d::CudaConv2d(const Conv2d& cpu, CudaContext& ctx, const GpuLayerOptions& options)
    : Conv2d(cpu.name(), cpu.config()), ctx_(ctx), options_(options) {}

CudaConv2d::~CudaConv2d() = default;

CudnnConv& CudaConv2d::conv() {
  // After setup(), which fixes a depthwise layer's filters and groups.
  if (!conv_) {
    ConvAlgoOptions algo;
    algo.allow_tf32 = ctx_.tf32();
    algo.deterministic = options_.deterministic;
    algo.workspace_limit = options_.workspace_limit_bytes;
    algo.cache = options_.algorithms;
    conv_ = std::make_unique<CudnnConv>(geom_, config_.filters, algo, config_.groups);
  }
  return *conv_;
}

std::string CudaConv2d::algorithmName(int64_t batch) const { return conv_ ? conv_->algorithms(batch) : ""; }

void CudaConv2d::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0);
  CudnnConv& c = conv();
  ConvOperands operands;
  operands.x = in[0]->data();
  operands.w = weight_.data();
  operands.y = out.data();
  c.choose(ctx_.cudnn(), n, ConvPass::Forward, operands, ctx_.libraryMemory().scratch);
  const size_t ws_bytes = c.workspaceBytes(ctx_.cudnn(), n, ConvPass::Forward);
  c.forward(ctx_.cudnn(), in[0]->data(), weight_.data(), out.data(), n, ctx_.workspace(ws_bytes), ws_bytes);
  if (config_.bias || relu_)
    cuda::biasActPlanes(out.data(), config_.bias ? bias_.data() : nullptr, n, config_.filters,
                        geom_.outPlane(), relu_, ctx_.stream());
}

void CudaConv2d::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                          const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0);
  const float* dy = dout.data();
  if (relu_) {
    float* m = masked_.floats(dout.numel(), dout.device());
    cuda::reluBackward(out.data(), dy, m, dout.numel(), ctx_.stream());
    dy = m;
  }
  CudnnConv& c = conv();
  const ScratchMemory scratch = ctx_.libraryMemory().scratch;
  ConvOperands operands;
  operands.x = in[0]->data();
  operands.w = weight_.data();
  operands.dy = dy;
  operands.dx = din[0] ? din[0]->data() : nullptr;
  c.choose(ctx_.cudnn(), n, ConvPass::BackwardFilter, operands, scratch);
  // The network's first layer needs no input gradient (din is null there).
  if (din[0]) c.choose(ctx_.cudnn(), n, ConvPass::BackwardData, operands, scratch);
  const size_t ws_bytes = std::max(c.workspaceBytes(ctx_.cudnn(), n, ConvPass::BackwardFilter),
                                   din[0] ? c.workspaceBytes(ctx_.cudnn(), n, ConvPass::BackwardData) : 0);
  void* ws = ctx_.workspace(ws_bytes);
  if (config_.bias)
    cuda::biasGradPlanes(dy, nullptr, n, config_.filters, geom_.outPlane(), dbias_.data(), ctx_.stream());
  c.backwardFilter(ctx_.cudnn(), in[0]->data(), dy, dweight_.data(), n, ws, ws_bytes);
  if (din[0]) c.backwardData(ctx_.cudnn(), weight_.data(), dy, din[0]->data(), n, ws, ws_bytes);
}

}  // namespace dtrain
