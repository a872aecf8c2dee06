// dense on a GPU: the CPU layer's configuration, shapes and parameters
// (core/nn/layers/dense.h), computed with cuBLAS and the backend's kernels on
// the device's compute stream.
#pragma once
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/dense.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

class CudaDense : public Dense {
 public:
  CudaDense(const Dense& cpu, CudaContext& ctx) : Dense(cpu.name(), cpu.config()), ctx_(ctx) {}

  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
  Scratch masked_;  // dout masked by the fused relu
};

}  // namespace dtrain
