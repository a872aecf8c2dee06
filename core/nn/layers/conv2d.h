// conv2d: 2-D cross-correlation over NCHW samples, as PyTorch's Conv2d.
// Weight [filters, C, kh, kw], bias [filters]; input [C,H,W] -> output
// [filters, Ho, Wo]. Options: filters (required, > 0), kernel (int or pair,
// default 3), stride (default 1), padding (default 0), bias (default true),
// init ("he" | "glorot", default from the model).
//
// Algorithms (chosen in setup()):
//   winograd  3x3 stride 1 with at least 4 input channels: F(2x2,3x3)
//             transforms + 16 products per chunk of samples, 2.25x fewer
//             multiplies than direct (conv2d_winograd.cpp).
//   im2col    everything else, per sample: im2col + one product; a 1x1
//             stride-1 unpadded kernel uses the input itself as the col
//             matrix (conv2d_im2col.cpp).
// Small products (few channels, as in a first layer) skip OpenBLAS's packing
// (ops::gemmUnpacked, ops::weightGradRows). Both algorithms fuse the bias
// (and a fused relu) into the pass that writes the output, and skip the
// input gradient when din is null (the first layer).
//
// Ownership and threading: as every Layer; scratch buffers are per instance.
#pragma once
#include "core/backend/ops.h"
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

enum class ConvAlgo { Auto, Im2col, Winograd };

struct Conv2dConfig {
  int64_t filters = 0;
  int64_t kernel_h = 3, kernel_w = 3;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  bool bias = true;
  InitKind init = InitKind::HeNormal;
  ConvAlgo algo = ConvAlgo::Auto;  // not a job option; tests and benchmarks pin it
};

class Conv2d : public Layer {
 public:
  Conv2d(std::string name, Conv2dConfig config);
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "conv2d"; }
  Shape setup(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> paramSpecs() const override;
  void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  int64_t forwardFlops() const override;
  std::string describe() const override;
  bool fuseActivation(const std::string& type) override;

  // The algorithm setup() chose (Im2col or Winograd).
  ConvAlgo algorithm() const { return algo_; }
  const Conv2dConfig& config() const { return config_; }

 private:
  void forwardIm2col(const float* x, int64_t n, float* y);
  void backwardIm2col(const float* x, const float* y, const float* dy, int64_t n, float* dx);
  void forwardWinograd(const float* x, int64_t n, float* y);
  void backwardWinograd(const float* x, const float* y, const float* dy, int64_t n, float* dx);
  int64_t winogradChunk() const;

 protected:  // the CUDA layer (core/backend/cuda/cuda_conv2d.h) computes with these
  Conv2dConfig config_;
  ops::Window2d geom_;
  ConvAlgo algo_ = ConvAlgo::Im2col;
  bool pointwise_ = false;  // 1x1, stride 1, no padding: col == input
  bool unpacked_ = false;   // products by ops::gemmUnpacked rather than gemm
  bool relu_ = false;       // a following relu fused into this layer
  Tensor weight_, bias_, dweight_, dbias_;

 private:
  // im2col: col (and dcol), masked dout. winograd: transformed filters u,
  // their gradient du, transformed inputs v (reused for dv), products m (reused for z).
  Scratch col_, masked_, u_, du_, v_, m_;
};

}  // namespace dtrain
