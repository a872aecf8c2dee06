// relu6 on a GPU: the CPU layer (core/nn/layers/relu6.h) computed by the
// kernels of clamp_kernels.h on the device's compute stream, on tensors of
// the activations' dtype (f32, or bf16/fp16 in a 16-bit precision).
#pragma once
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/relu6.h"

namespace dtrain {

class CudaRelu6 : public Relu6 {
 public:
  CudaRelu6(const Relu6& cpu, CudaContext& ctx) : Relu6(cpu.name()), ctx_(ctx) {}
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
};

}  // namespace dtrain
