// max_pool and avg_pool on a GPU: the CPU layers' configuration and shapes
// (core/nn/layers/max_pool.h, avg_pool.h), pooled by cuDNN on the device's
// compute stream, on tensors of the activations' dtype (f32, or bf16/fp16 in
// a 16-bit precision). Backward reads the forward's input and output, which
// the model keeps, so no argmax buffer is needed.
#pragma once
#include <memory>

#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/avg_pool.h"
#include "core/nn/layers/max_pool.h"

namespace dtrain {

class CudnnPool;

class CudaMaxPool : public MaxPool {
 public:
  CudaMaxPool(const MaxPool& cpu, CudaContext& ctx);
  ~CudaMaxPool() override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
  std::unique_ptr<CudnnPool> pool_;  // made on first use, once setup() has fixed the geometry
};

class CudaAvgPool : public AvgPool {
 public:
  CudaAvgPool(const AvgPool& cpu, CudaContext& ctx);
  ~CudaAvgPool() override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
  std::unique_ptr<CudnnPool> pool_;
};

}  // namespace dtrain
