// conv2d: 2-D cross-correlation over NCHW samples, as PyTorch's Conv2d.
// Weight [filters, C/groups, kh, kw], bias [filters]; input [C,H,W] -> output
// [filters, Ho, Wo]. Options: filters (required, > 0), kernel (int or pair,
// default 3), stride (default 1), padding (default 0), groups (default 1;
// must divide the input channels and the filters: group g's filters see only
// its C/groups channels), bias (default true), init ("he" | "glorot", default
// from the model).
//
// depthwise_conv2d (Keras' DepthwiseConv2D; core/nn/layers/depthwise_conv2d.h)
// is this layer with groups = C and filters = C * depth_multiplier, fixed in
// setup() from the input (Conv2dConfig::depth_multiplier > 0).
//
// Algorithms (chosen in setup()):
//   winograd  groups 1, 3x3 stride 1 with at least 4 input channels:
//             F(4x4,3x3) transforms + 36 products per chunk of samples, 4x
//             fewer multiplies than direct; F(2x2,3x3) (16 products, 2.25x)
//             for outputs narrower than 13, where its smaller tiles fill the
//             transforms' vectors (conv2d_winograd.cpp).
//   depthwise groups = C: a direct kernel per plane, vectorised for 3x3
//             padding 1 stride 1 and 2 (core/backend/depthwise_ops.h;
//             conv2d_grouped.cpp).
//   pointwise groups 1, 1x1 stride 1 unpadded, output plane of at most 64
//             pixels: the batch's planes side by side, one product for the
//             whole batch (conv2d_pointwise.cpp).
//   im2col    everything else, per sample: im2col + one product; a 1x1
//             stride-1 unpadded kernel uses the input itself as the col
//             matrix (conv2d_im2col.cpp); with groups > 1 one im2col and
//             product per group (conv2d_grouped.cpp).
// Small products (few channels, as in a first layer) skip OpenBLAS's packing
// (ops::gemmUnpacked; for the weight gradient of at most 10 inputs per
// filter, ops::weightGradRows). Every algorithm fuses the bias
// (and a fused relu) into the pass that writes the output, and skips the
// input gradient when din is null (the first layer).
//
// Ownership and threading: as every Layer; the scratch buffers are per thread
// (scratch(), below).
#pragma once
#include "core/backend/ops.h"
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

enum class ConvAlgo { Auto, Im2col, Winograd2x2, Winograd4x4, Depthwise, Pointwise };

struct Conv2dConfig {
  int64_t filters = 0;  // with depth_multiplier > 0: set by setup()
  int64_t kernel_h = 3, kernel_w = 3;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t groups = 1;  // with depth_multiplier > 0: set by setup()
  // > 0: a depthwise_conv2d layer: groups = input channels, filters = that * depth_multiplier.
  int64_t depth_multiplier = 0;
  bool bias = true;
  InitKind init = InitKind::HeNormal;
  ConvAlgo algo = ConvAlgo::Auto;  // not a job option; tests and benchmarks pin it
};

class Conv2d : public Layer {
 public:
  Conv2d(std::string name, Conv2dConfig config);
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  // "conv2d", or "depthwise_conv2d" for a layer made by that type (also on a GPU).
  std::string type() const override { return config_.depth_multiplier > 0 ? "depthwise_conv2d" : "conv2d"; }
  SixteenBitRole sixteenBitRole() const override { return SixteenBitRole::Product; }
  Shape setup(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> paramSpecs() const override;
  void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  // Every CPU algorithm but the depthwise kernel, which computes both at once.
  bool splitsBackward() const override { return algo_ != ConvAlgo::Depthwise; }
  int64_t forwardFlops() const override;
  std::string describe() const override;
  // The CPU algorithm setup() chose: "im2col", "winograd2x2", "winograd4x4", "depthwise", "pointwise".
  std::string algorithmName(int64_t batch) const override;
  bool fuseActivation(const std::string& type) override;

  // The algorithm setup() chose (never Auto).
  ConvAlgo algorithm() const { return algo_; }
  const Conv2dConfig& config() const { return config_; }

 private:
  // Each backward computes dx (null: none) and, with `param_grads`, adds the
  // parameter gradients (BackwardPart::Inputs passes false).
  void forwardIm2col(const float* x, int64_t n, float* y);
  void backwardIm2col(const float* x, const float* y, const float* dy, int64_t n, float* dx,
                      bool param_grads);
  // dW += dY col^T (dY masked by a fused relu) and the bias sums for `filters`
  // rows of dY against the [k, p] col matrix. Returns the dY the input
  // gradient's product reads: masked into `masked` under a fused relu (null
  // when no input gradient follows and the rows kernel needs no mask), else dy.
  const float* weightGradient(const float* dy, const float* y, const float* cols, int64_t filters, int64_t k,
                              int64_t p, float* dw, float* dbias, float* masked);
  void forwardPointwise(const float* x, int64_t n, float* y);
  void backwardPointwise(const float* x, const float* y, const float* dy, int64_t n, float* dx,
                         bool param_grads);
  void forwardWinograd(const float* x, int64_t n, float* y);
  void backwardWinograd(const float* x, const float* y, const float* dy, int64_t n, float* dx,
                        bool param_grads);
  int64_t winogradChunk() const;
  void forwardGrouped(const float* x, int64_t n, float* y);
  void backwardGrouped(const float* x, const float* y, const float* dy, int64_t n, float* dx,
                       bool param_grads);
  void forwardDepthwise(const float* x, int64_t n, float* y);
  void backwardDepthwise(const float* x, const float* y, const float* dy, int64_t n, float* dx);

 protected:  // the CUDA layer (core/nn/cuda/cuda_conv2d.h) computes with these
  Conv2dConfig config_;
  ops::Window2d geom_;
  ConvAlgo algo_ = ConvAlgo::Im2col;
  const ops::WinogradVariant* winograd_ = nullptr;  // the Winograd algorithms' transforms
  bool pointwise_ = false;                          // 1x1, stride 1, no padding: col == input
  bool unpacked_ = false;          // products by ops::gemmUnpacked rather than gemm (per group)
  bool rows_weight_grad_ = false;  // weight gradient by ops::weightGradRows rather than gemm
  bool relu_ = false;              // a following relu fused into this layer
  Tensor weight_, bias_, dweight_, dbias_;

 private:
  // im2col: col (and dcol), masked dout. winograd: transformed filters u,
  // their gradient du, transformed inputs v (reused for dv), products m (reused
  // for z). depthwise: the kernel's scratch in col. pointwise: the batch's
  // input side by side in col (then its gradient), output or its gradient in
  // masked. Every buffer lives only within one forward or backward call.
  struct Buffers {
    Scratch col, masked, u, du, v, m;
  };
  // One set per thread, shared by every convolution the thread computes: a
  // model's layers run one after another, so the buffers the next layer writes
  // are still in cache from the last one. Per-layer buffers came back cold, a
  // megabyte or more per layer and call: a micro-batch of 16 (a pipeline
  // stage's) paid that in every call, a batch of 128 only in its first chunk.
  // And a thread holds the largest layer's scratch instead of every layer's.
  static Buffers& scratch();
};

}  // namespace dtrain
