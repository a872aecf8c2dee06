// dropout on a GPU: the CPU layer (core/nn/layers/dropout.h) with the same
// counter-based mask, so a sample is dropped identically on either device.
// forward and backward are overridden whole, not only the masked passes the
// CPU layer lets a subclass replace, because those take floats and in a
// 16-bit precision the activations are bf16 or fp16; the identity cases are
// still the CPU layer's (a copy of any dtype).
#pragma once
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/dropout.h"

namespace dtrain {

class CudaDropout : public Dropout {
 public:
  CudaDropout(const Dropout& cpu, CudaContext& ctx) : Dropout(cpu.name(), cpu.rate()), ctx_(ctx) {}
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
};

}  // namespace dtrain
