#include "core/nn/cuda/cuda_global_avg_pool.h"

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cudnn_pool.h"
#include "core/backend/cuda/global_avg_pool_kernels.h"

namespace dtrain {

CudaGlobalAvgPool::CudaGlobalAvgPool(const GlobalAvgPool& cpu, CudaContext& ctx)
    : GlobalAvgPool(cpu.name()), ctx_(ctx) {}
CudaGlobalAvgPool::~CudaGlobalAvgPool() = default;

CudnnPool& CudaGlobalAvgPool::pool() {
  if (!pool_) {
    const ops::Window2d plane{channels_, height_, width_, height_, width_, 1, 1, 0, 0};
    pool_ = std::make_unique<CudnnPool>(plane, CudnnPool::Mode::AverageIncludePad);
  }
  return *pool_;
}

void CudaGlobalAvgPool::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const DType dtype = in[0]->dtype();
  if (dtype == DType::F32) {
    pool().forward(ctx_.cudnn(), in[0]->data(), out.data(), in[0]->dim(0));
    return;
  }
  const int64_t planes = in[0]->dim(0) * channels_;
  cuda::globalAvgPoolForward(in[0]->raw(), out.raw(), dtype, planes, plane_, ctx_.stream());
  checkCuda(cudaGetLastError(), "launch the global_avg_pool layer's mean");
}

void CudaGlobalAvgPool::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                                 const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (!din[0]) return;
  const DType dtype = in[0]->dtype();
  if (dtype == DType::F32) {
    pool().backward(ctx_.cudnn(), in[0]->data(), out.data(), dout.data(), din[0]->data(), in[0]->dim(0));
    return;
  }
  cuda::globalAvgPoolBackward(dout.raw(), din[0]->raw(), dtype, dout.dim(0) * channels_, plane_,
                              ctx_.stream());
  checkCuda(cudaGetLastError(), "launch the global_avg_pool layer's gradient");
}

}  // namespace dtrain
