// global_avg_pool on a GPU. fp32: cuDNN average pooling with one window
// covering each plane, so [C,H,W] -> [C,1,1], which is the CPU layer's [C] in
// memory. 16-bit activations (bf16, fp16): the kernels of
// global_avg_pool_kernels.h, which sum each plane in float (cuDNN does not
// say what it sums 16-bit pooling in, and a plane is the whole feature map).
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
  std::unique_ptr<CudnnPool> pool_;  // made on first fp32 use, once setup() has fixed the plane
};

}  // namespace dtrain
