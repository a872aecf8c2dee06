// conv2d and depthwise_conv2d on a GPU: the CPU layer's configuration,
// shapes and parameters (core/nn/layers/conv2d.h), convolved by cuDNN (groups
// through its group count; each pass's algorithm timed on the layer's own
// buffers the first time a batch size is seen, or taken from the run's
// record of earlier choices, within [job] gpu_workspace_mb; see
// core/backend/cuda/cudnn_conv.h), bias and a fused relu by the backend's
// kernels, all on the device's compute stream.
//
// In a 16-bit precision (bf16 or fp16 activations; Model binds the weight and
// bias as views of the activations' dtype, the gradients as fp32) cuDNN
// convolves 16-bit data with fp32 sums (tensor-core kernels among the
// candidates; each pass in NCHW or on channels-last copies, whichever the
// timing says is faster: core/backend/cuda/conv_layouts.h), storing y and dx
// rounded to 16 bits; the bias and relu are
// applied in float to the stored output, which is rounded again; the bias
// gradient is summed in double from the 16-bit dY. cuDNN writes the weight
// gradient in the filter's type, so it goes to a 16-bit scratch that is then
// added to the fp32 gradient: each pass's weight gradient is thus rounded
// once to 16 bits (as PyTorch autocast's convolution weight gradients are)
// before it accumulates in fp32.
#pragma once
#include <memory>

#include "core/backend/cuda/cuda_context.h"
#include "core/nn/gpu_layer_options.h"
#include "core/nn/layers/conv2d.h"
#include "core/nn/layers/depthwise_conv2d.h"  // cuda_layers makes both types with this class
#include "core/nn/layers/scratch.h"

namespace dtrain {

class ConvLayouts;

class CudaConv2d : public Conv2d {
 public:
  CudaConv2d(const Conv2d& cpu, CudaContext& ctx, const GpuLayerOptions& options = {});
  ~CudaConv2d() override;

  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  // One call computes both on the device (the CPU layer's split is not inherited).
  bool splitsBackward() const override { return false; }
  // cuDNN's algorithm for each pass at this batch size, with its time.
  std::string algorithmName(int64_t batch) const override;

 private:
  // The convolution of data of `dtype` (made anew, its choices with it, if
  // the dtype ever changes); throws DeviceError unless the bound weight (and
  // bias) are of `dtype`.
  ConvLayouts& conv(DType dtype);

  CudaContext& ctx_;
  GpuLayerOptions options_;
  std::unique_ptr<ConvLayouts> conv_;  // made on first use, once setup() has fixed the geometry
  Scratch masked_;                   // dout masked by the fused relu, of dout's dtype
  Scratch dweight16_;                // a 16-bit weight gradient, before it is added to dweight_
};

}  // namespace dtrain
