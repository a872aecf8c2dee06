// conv2d and depthwise_conv2d on a GPU: the CPU layer's configuration,
// shapes and parameters (core/nn/layers/conv2d.h), convolved by cuDNN (groups
// through its group count; algorithms chosen once per batch size, workspace
// bounded by kConvWorkspaceLimit), bias and a fused relu by the backend's
// kernels, all on the device's compute stream.
#pragma once
#include <memory>

#include "core/backend/cuda/cuda_context.h"
#include "core/nn/layers/conv2d.h"
#include "core/nn/layers/depthwise_conv2d.h"  // cuda_layers makes both types with this class
#include "core/nn/layers/scratch.h"

namespace dtrain {

class CudnnConv;

// The most workspace one convolution's algorithms may use: faster algorithms
// needing more are passed over, so memory stays predictable.
constexpr size_t kConvWorkspaceLimit = size_t{256} << 20;

class CudaConv2d : public Conv2d {
 public:
  CudaConv2d(const Conv2d& cpu, CudaContext& ctx);
  ~CudaConv2d() override;

  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  CudnnConv& conv();

  CudaContext& ctx_;
  std::unique_ptr<CudnnConv> conv_;  // made on first use, once setup() has fixed the geometry
  Scratch masked_;                   // dout masked by the fused relu
};

}  // namespace dtrain
