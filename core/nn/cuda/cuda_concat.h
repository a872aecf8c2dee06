// concat on a GPU: the CPU layer (core/nn/layers/concat.h), each input's part
// of every row moved by one strided copy (cudaMemcpy2DAsync) on the device's
// compute stream, in both directions; the copies count bytes, so they move
// elements of any dtype (f32, or bf16/fp16 in a 16-bit precision).
#pragma once
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/concat.h"

namespace dtrain {

class CudaConcat : public Concat {
 public:
  CudaConcat(const Concat& cpu, CudaContext& ctx) : Concat(cpu.name(), cpu.axis()), ctx_(ctx) {}
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
};

}  // namespace dtrain
