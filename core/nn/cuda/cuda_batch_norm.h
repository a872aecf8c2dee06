// batch_norm on a GPU: the CPU layer's options, shapes, parameters and
// buffers (core/nn/layers/batch_norm.h), computed on the device's compute
// stream. Paths for a training pass, by LayerContext::stats_reducer (forward
// and backward of one pass get the same context):
//   null     this process computes the whole batch, on the faster of two
//            paths, timed on the first training pass of each batch size
//            (forward + backward on the layer's own buffers with CUDA
//            events, the median of 3, the layer's state untouched) or taken
//            from the run's AlgorithmCache (core/backend/algorithm_keys.h,
//            BatchNormAlgorithmKey); both are deterministic, so [job]
//            deterministic allows either:
//     cudnn  cuDNN's batch normalisation (CUDNN_BATCHNORM_SPATIAL for
//            [C,H,W], PER_ACTIVATION for [C]; its running variance is the
//            unbiased one and its exponential average factor is the
//            momentum, as PyTorch's), the fused residual add and relu/relu6
//            by one kernel of our own after forward, the mask before
//            backward. cuDNN's NCHW kernels are slow at few channels.
//     own    the kernels of batch_norm_kernels.h, with no host read-back:
//            the shifted sums (K the running mean), the moments from them on
//            the device in one round, the statistics, and one output pass
//            with the residual and activation; backward sums [sum g,
//            sum g * (x - mean)] and writes dx in one more pass.
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
// In a 16-bit precision (bf16, fp16) x, y, the residual, dy and dx are
// 16-bit tensors of one dtype (Model's; checked) and the parameters, their
// gradients, the running statistics and everything per channel stay float
// (SixteenBitRole::Normalisation): cuDNN takes 16-bit data descriptors with
// the float parameter descriptor, our kernels load 16-bit values and store
// rounded (batch_norm_kernels.h). What the CPU's reference path rounds once,
// act(bn(x) + residual), must be rounded once here too, so:
//   - a training pass with a fused residual add takes our kernels, untimed:
//     cuDNN stores its bn(x) rounded to 16 bits, and adding the residual
//     after it would round a second time (relu and relu6 alone need no such
//     care: their bounds are 16-bit values, so act(round(v)) = round(act(v)),
//     up to a zero's sign, and they stay an element pass after cuDNN's);
//   - an inference pass takes our kernels (the frozen statistics, then one
//     fused output pass) for the same reason with a residual, and without
//     one as well: one pass instead of two with an activation, the CPU
//     layer's own expression per element, and no reliance on cuDNN's 16-bit
//     inference call, which unlike a training pass has no timing to fall
//     back from a refusal.
// fp32 and tf32 run exactly as described above, on float tensors.
//
// Ownership and threading: as every Layer. Device memory for the per-channel
// statistics is allocated on the first pass and kept. Timing a batch size
// synchronises the stream once (not inside a CUDA graph capture: capture
// after the first training step of each batch size).
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/algorithm_keys.h"
#include "core/backend/cuda/batch_norm_kernels.h"
#include "core/backend/cuda/cuda_context.h"
#include "core/backend/cuda/cudnn_descriptors.h"
#include "core/nn/gpu_layer_options.h"
#include "core/nn/layers/batch_norm.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

class CudaBatchNorm : public BatchNorm {
 public:
  CudaBatchNorm(const BatchNorm& cpu, CudaContext& ctx, const GpuLayerOptions& options = {});
  ~CudaBatchNorm() override;

  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  // The single-process training path at this batch size ("cudnn", "own"),
  // with its time when timed here or cached; "" before its first training pass.
  std::string algorithmName(int64_t batch) const override;
  // For tests: every single-process training pass takes `path`, untimed
  // (except a 16-bit pass with a residual, which always takes our kernels).
  void forcePath(BatchNormPath path) { forced_path_ = path; }

 private:
  // Where a pass's parameter gradients go: the layer's (accumulated) or
  // scratch (a timing run, which must leave them as they are).
  enum class Into { Params, Scratch };

  // The path for a single-process training pass of n samples: our kernels for
  // a 16-bit one with a residual, else forced, chosen before, cached, or timed
  // now on these buffers. Below, the residual (a fused add's other input), dx
  // and dresidual are of x's dtype, as y and dy are.
  BatchNormPath pathFor(const Tensor& x, Tensor& y, const void* residual);
  // Median milliseconds of forward + backward on `path`, state untouched; < 0 on failure.
  double timePath(BatchNormPath path, const Tensor& x, Tensor& y, const void* residual);
  void forwardCudnn(const Tensor& x, Tensor& y, const void* residual, bool update);
  void forwardOwn(const Tensor& x, Tensor& y, const void* residual, bool update);
  void forwardReduced(const Tensor& x, Tensor& y, const void* residual, const LayerContext& ctx);
  // An inference pass on our kernels (16-bit tensors).
  void forwardFrozenOwn(const Tensor& x, Tensor& y, const void* residual);
  void backwardCudnn(const Tensor& x, const Tensor& y, const Tensor& dy, void* dx, void* dresidual,
                     Into into);
  // The whole batch's sums when `reducer` is null in training.
  void backwardOwn(const Tensor& x, const Tensor& y, const Tensor& dy, void* dx, void* dresidual, Into into,
                   bool training, StatsReducer* reducer);
  // The device memory below, allocated once channels_ is known.
  void allocate();
  // x's descriptor for a batch of n (n >= 1) of `dtype`, made on first use.
  const CudnnTensorDescriptor& dataDescriptor(int64_t n, DType dtype);
  // The batch x: its sample count and dtype.
  cuda::BatchNormDims dims(const Tensor& x) const { return {x.dim(0), channels_, plane_, x.dtype()}; }
  const float* gammaOrOnes() const { return config_.scale ? gamma_.data() : ones_; }
  const float* betaOrZeros() const { return config_.center ? beta_.data() : zeros_; }

  CudaContext& ctx_;
  GpuLayerOptions options_;
  std::map<std::pair<int64_t, DType>, CudnnTensorDescriptor> data_descriptors_;  // by batch size, dtype
  // [1, C, 1, 1], float for 16-bit data too (cuDNN's bnScaleBiasMeanVarDesc
  // of half and bfloat16 data is float, as cudnnDeriveBNTensorDescriptor makes it).
  std::unique_ptr<CudnnTensorDescriptor> param_descriptor_;
  struct Chosen {
    BatchNormPath path;
    double time_ms;   // its median; < 0: neither path could be timed (then cuDNN, as before)
    double other_ms;  // the other path's; < 0 when cached or not timed
    bool cached;
    const char* untimed = nullptr;  // why the path is the only one, when it is (not timed, not cached)
  };
  std::map<int64_t, Chosen> chosen_;  // by batch size
  std::optional<BatchNormPath> forced_path_;
  BatchNormPath last_path_ = BatchNormPath::Cudnn;  // the last single-process training forward's
  std::shared_ptr<void> doubles_, floats_;
  // In doubles_: [count, count K, sum (x - K), sum (x - K)^2] (1 + 3C),
  // sum (x - mean)^2 (C), the batch's [mean | variance] (2C),
  // [sum g, sum g (x - mean)] (2C).
  double* shifted_sums_ = nullptr;
  double* deviations_ = nullptr;
  double* moments_ = nullptr;
  double* grad_sums_ = nullptr;
  // In floats_, C each: the pass's statistics (cuDNN's saved mean and inverse
  // deviation on its path), the output pass's scale and shift, the stand-ins
  // for a missing gamma (ones) and beta (zeros), and parameter gradients
  // that go nowhere (cuDNN's when one of them is missing, and timing runs');
  // then the shifts K of the pass; then an inference pass's statistics,
  // scale and shift (our kernels'), apart so that they leave a training
  // pass's alone.
  cuda::BatchNormStats stats_out_{nullptr, nullptr};
  float* out_scale_ = nullptr;
  float* out_shift_ = nullptr;
  float* ones_ = nullptr;
  float* zeros_ = nullptr;
  float* dgamma_scratch_ = nullptr;
  float* dbeta_scratch_ = nullptr;
  float* shifts_ = nullptr;
  cuda::BatchNormStats frozen_{nullptr, nullptr};
  float* frozen_scale_ = nullptr;
  float* frozen_shift_ = nullptr;
  // Host copies of the reduced vectors and of what goes back to the device.
  std::vector<double> host_sums_, host_deviations_, host_moments_;
  std::vector<float> host_shifts_, host_mean_;
  // dy masked by the fused activation; dx and the residual's gradient nobody
  // asked for (cuDNN writes a dx; timing runs write both).
  Scratch masked_, unused_dx_, unused_dresidual_;
};

}  // namespace dtrain
