#include "core/backend/cuda/cuda_conv2d.h"

#include "core/backend/cuda/cudnn_conv.h"
#include "core/backend/cuda/elementwise_kernels.h"

namespace dtrain {

CudaConv2d::CudaConv2d(const Conv2d& cpu, CudaContext& ctx) : Conv2d(cpu.name(), cpu.config()), ctx_(ctx) {}

CudaConv2d::~CudaConv2d() = default;

CudnnConv& CudaConv2d::conv() {
  // After setup(), which fixes a depthwise layer's filters and groups.
  if (!conv_)
    conv_ =
        std::make_unique<CudnnConv>(geom_, config_.filters, ctx_.tf32(), kConvWorkspaceLimit, config_.groups);
  return *conv_;
}

void CudaConv2d::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0);
  CudnnConv& c = conv();
  const size_t ws_bytes = c.workspaceBytes(ctx_.cudnn(), n);
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
  const size_t ws_bytes = c.workspaceBytes(ctx_.cudnn(), n);
  void* ws = ctx_.workspace(ws_bytes);
  if (config_.bias)
    cuda::biasGradPlanes(dy, nullptr, n, config_.filters, geom_.outPlane(), dbias_.data(), ctx_.stream());
  c.backwardFilter(ctx_.cudnn(), in[0]->data(), dy, dweight_.data(), n, ws, ws_bytes);
  // The network's first layer needs no input gradient (din is null there).
  if (din[0]) c.backwardData(ctx_.cudnn(), weight_.data(), dy, din[0]->data(), n, ws, ws_bytes);
}

}  // namespace dtrain
