// relu on a GPU: the CPU layer (core/nn/layers/relu.h) computed by the
// backend's kernels on the device's compute stream, on tensors of any dtype
// (a 16-bit precision's are masked as they are: relu rounds nothing).
#pragma once
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/relu.h"

namespace dtrain {

class CudaRelu : public Relu {
 public:
  CudaRelu(const Relu& cpu, CudaContext& ctx) : Relu(cpu.name()), ctx_(ctx) {}
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
};

}  // namespace dtrain
