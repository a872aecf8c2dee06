// add on a GPU: the CPU layer (core/nn/layers/add.h) with its sums in the same
// order (sum_kernels.h) and its gradient copies, all queued on the device's
// compute stream.
#pragma once
#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/add.h"

namespace dtrain {

class CudaAdd : public Add {
 public:
  CudaAdd(const Add& cpu, CudaContext& ctx) : Add(cpu.name()), ctx_(ctx) {}
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudaContext& ctx_;
};

}  // namespace dtrain
