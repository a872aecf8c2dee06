#include "core/nn/cuda/cuda_pool.h"

#include "core/backend/cuda/cudnn_pool.h"

namespace dtrain {

namespace {

CudnnPool& poolFor(std::unique_ptr<CudnnPool>& pool, const ops::Window2d& geom, CudnnPool::Mode mode) {
  if (!pool) pool = std::make_unique<CudnnPool>(geom, mode);
  return *pool;
}

// Both layers' passes, on tensors of the activations' dtype (through raw():
// bf16 or fp16 in a 16-bit precision).
void poolForward(CudnnPool& pool, cudnnHandle_t cudnn, const Tensor& x, Tensor& y) {
  pool.forward(cudnn, x.raw(), y.raw(), x.dtype(), x.dim(0));
}

void poolBackward(CudnnPool& pool, cudnnHandle_t cudnn, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor& dx) {
  pool.backward(cudnn, x.raw(), y.raw(), dy.raw(), dx.raw(), x.dtype(), x.dim(0));
}

}  // namespace

CudaMaxPool::CudaMaxPool(const MaxPool& cpu, CudaContext& ctx)
    : MaxPool(cpu.name(), cpu.config()), ctx_(ctx) {}
CudaMaxPool::~CudaMaxPool() = default;

void CudaMaxPool::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  poolForward(poolFor(pool_, geom_, CudnnPool::Mode::Max), ctx_.cudnn(), *in[0], out);
}

void CudaMaxPool::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                           const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (!din[0]) return;
  poolBackward(poolFor(pool_, geom_, CudnnPool::Mode::Max), ctx_.cudnn(), *in[0], out, dout, *din[0]);
}

CudaAvgPool::CudaAvgPool(const AvgPool& cpu, CudaContext& ctx)
    : AvgPool(cpu.name(), cpu.config()), ctx_(ctx) {}
CudaAvgPool::~CudaAvgPool() = default;

void CudaAvgPool::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  poolForward(poolFor(pool_, geom_, CudnnPool::Mode::AverageIncludePad), ctx_.cudnn(), *in[0], out);
}

void CudaAvgPool::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                           const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (!din[0]) return;
  poolBackward(poolFor(pool_, geom_, CudnnPool::Mode::AverageIncludePad), ctx_.cudnn(), *in[0], out, dout,
               *din[0]);
}

}  // namespace dtrain
