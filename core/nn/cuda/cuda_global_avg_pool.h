// global_avg_pool on a GPU: cuDNN average pooling with one window covering
// each plane, so [C,H,W] -> [C,1,1], which is the CPU layer's [C] in memory.
#pragma once
#include <memory>

#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/global_avg_pool.h"

namespace dtrain {

class CudnnPool;

class CudaGlobalAvgPool : public GlobalAvgPool {
 public:
  CudaGlobalAvgPool(const GlobalAvgPool& cpu, CudaContext& ctx);
  ~CudaGlobalAvgPool() override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudnnPool& pool();

  CudaContext& ctx_;
  std::unique_ptr<CudnnPool> pool_;  // made on first use, once setup() has fixed the plane
};

}  // namespace dtrain
