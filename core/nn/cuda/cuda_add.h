// add on a GPU: the CPU layer (core/nn/layers/add.h) with its sums in the same
// order (sum_kernels.h: all inputs and the fused relu in one float pass,
// stored once, so on 16-bit activations rounded once as the CPU's reference
// path rounds the layer's result) and its gradient copies, all queued on the
// device's compute stream.
#pragma once
#include <vector>

#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/add.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

class CudaAdd : public Add {
 public:
  CudaAdd(const Add& cpu, CudaContext& ctx) : Add(cpu.name()), ctx_(ctx) {}
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
  std::vector<const void*> inputs_;  // the sum's input pointers, kept to allocate once
  Scratch partial_;                  // its float running sum past cuda::kSumInputsPerPass inputs
};

}  // namespace dtrain
