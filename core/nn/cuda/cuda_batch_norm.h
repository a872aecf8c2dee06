// batch_norm on a GPU: the CPU layer's options, shapes, parameters and
// buffers (core/nn/layers/batch_norm.h), computed on the device's compute
// stream. Two paths for a training pass, chosen by LayerContext::stats_reducer
// (forward and backward of one pass get the same context):
//   null     this process computes the whole batch: cuDNN's batch
//            normalisation (CUDNN_BATCHNORM_SPATIAL for [C,H,W],
//            PER_ACTIVATION for [C]; its running variance is the unbiased
//            one and its exponential average factor is the momentum, as
//            PyTorch's), the fused relu/relu6 by a kernel of our own after
//            forward and before backward.
//   non-null the statistics are summed across ranks ([strategy]
//            sync_batchnorm) with the CPU layer's vectors, in its order: the
//            kernels of batch_norm_kernels.h sum [count, count * K,
//            sum (x - K), sum (x - K)^2] per channel in double in device
//            memory, K the running mean (batch_norm_moments.h); the host
//            reads the summed vector back and takes the CPU layer's
//            decisions on it (the count check, and a second round of
//            [sum (x - mean)^2] when K lies beyond a standard deviation of
//            the mean); backward sums [sum g, sum g * (x - mean)]. The
//            reducer sums each across the ranks between the passes, as the
//            CPU layer does across threads. It is called with the sums
//            queued on the compute stream and must order itself after them,
//            and the work queued after it returns after its result. Reading
//            the sums back waits for the stream once per forward (twice with
//            a second round): the price of deciding as every other rank does.
// Inference passes use cuDNN's inference call; their backward (rarely
// wanted: frozen statistics) runs on our kernels.
//
// Ownership and threading: as every Layer. Device memory for the per-channel
// statistics is allocated on the first pass and kept.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "core/backend/cuda/batch_norm_kernels.h"
#include "core/backend/cuda/cuda_context.h"
#include "core/backend/cuda/cudnn_descriptors.h"
#include "core/nn/layers/batch_norm.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

class CudaBatchNorm : public BatchNorm {
 public:
  CudaBatchNorm(const BatchNorm& cpu, CudaContext& ctx);
  ~CudaBatchNorm() override;

  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;

 private:
  void forwardCudnn(const Tensor& x, Tensor& y, const LayerContext& ctx);
  void forwardReduced(const Tensor& x, Tensor& y, const LayerContext& ctx);
  void backwardCudnn(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx);
  void backwardOwn(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const LayerContext& ctx);
  // The device memory below, allocated once channels_ is known.
  void allocate();
  // x's descriptor for a batch of n (n >= 1), made on first use.
  const CudnnTensorDescriptor& dataDescriptor(int64_t n);
  cuda::BatchNormDims dims(int64_t n) const { return {n, channels_, plane_}; }
  const float* gammaOrOnes() const { return config_.scale ? gamma_.data() : ones_; }
  const float* betaOrZeros() const { return config_.center ? beta_.data() : zeros_; }

  CudaContext& ctx_;
  std::map<int64_t, CudnnTensorDescriptor> data_descriptors_;  // by batch size
  std::unique_ptr<CudnnTensorDescriptor> param_descriptor_;    // [1, C, 1, 1]
  std::shared_ptr<void> doubles_, floats_;
  // In doubles_: [count, count K, sum (x - K), sum (x - K)^2] (1 + 3C),
  // sum (x - mean)^2 (C), the batch's [mean | variance] from the host (2C),
  // [sum g, sum g (x - mean)] (2C).
  double* shifted_sums_ = nullptr;
  double* deviations_ = nullptr;
  double* moments_ = nullptr;
  double* grad_sums_ = nullptr;
  // In floats_, C each: the pass's statistics (cuDNN's saved mean and inverse
  // deviation on its path), the output pass's scale and shift, the stand-ins
  // for a missing gamma (ones) and beta (zeros), and cuDNN's parameter
  // gradients when one of them is missing; then the shifts K of the pass.
  cuda::BatchNormStats stats_out_{nullptr, nullptr};
  float* out_scale_ = nullptr;
  float* out_shift_ = nullptr;
  float* ones_ = nullptr;
  float* zeros_ = nullptr;
  float* dgamma_scratch_ = nullptr;
  float* dbeta_scratch_ = nullptr;
  float* shifts_ = nullptr;
  // Host copies of the reduced vectors and of what goes back to the device.
  std::vector<double> host_sums_, host_deviations_, host_moments_;
  std::vector<float> host_shifts_, host_mean_;
  Scratch masked_, unused_dx_;  // dy masked by the fused activation; dx nobody asked for (cuDNN writes one)
};

}  // namespace dtrain
