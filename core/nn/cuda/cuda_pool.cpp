#include "core/nn/cuda/cuda_pool.h"

#include "core/backend/cuda/cudnn_pool.h"

namespace dtrain {

namespace {

CudnnPool& poolFor(std::unique_ptr<CudnnPool>& pool, const ops::Window2d& geom, CudnnPool::Mode mode) {
  if (!pool) pool = std::make_unique<CudnnPool>(geom, mode);
  return *pool;
}

}  // namespace

CudaMaxPool::CudaMaxPool(const MaxPool& cpu, CudaContext& ctx)
    : MaxPool(cpu.name(), cpu.config()), ctx_(ctx) {}
CudaMaxPool::~CudaMaxPool() = default;

void CudaMaxPool::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  poolFor(pool_, geom_, CudnnPool::Mode::Max).forward(ctx_.cudnn(), in[0]->data(), out.data(), in[0]->dim(0));
}

void CudaMaxPool::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                           const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (!din[0]) return;
  poolFor(pool_, geom_, CudnnPool::Mode::Max)
      .backward(ctx_.cudnn(), in[0]->data(), out.data(), dout.data(), din[0]->data(), in[0]->dim(0));
}

CudaAvgPool::CudaAvgPool(const AvgPool& cpu, CudaContext& ctx)
    : AvgPool(cpu.name(), cpu.config()), ctx_(ctx) {}
CudaAvgPool::~CudaAvgPool() = default;

void CudaAvgPool::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  poolFor(pool_, geom_, CudnnPool::Mode::AverageIncludePad)
      .forward(ctx_.cudnn(), in[0]->data(), out.data(), in[0]->dim(0));
}

void CudaAvgPool::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                           const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (!din[0]) return;
  poolFor(pool_, geom_, CudnnPool::Mode::AverageIncludePad)
      .backward(ctx_.cudnn(), in[0]->data(), out.data(), dout.data(), din[0]->data(), in[0]->dim(0));
}

}  // namespace dtrain
