#include "core/nn/cuda/cuda_batch_norm.h"

#include <string>

#include "core/backend/cuda/cudnn_handle.h"
#include "core/backend/cuda/fill_kernels.h"
#include "core/nn/layers/batch_norm_moments.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

namespace {

const float kOne = 1.0f, kZero = 0.0f;

}  // namespace

CudaBatchNorm::CudaBatchNorm(const BatchNorm& cpu, CudaContext& ctx)
    : BatchNorm(cpu.name(), cpu.config()), ctx_(ctx) {}
CudaBatchNorm::~CudaBatchNorm() = default;

void CudaBatchNorm::allocate() {
  if (floats_) return;
  const int64_t c = channels_;
  const int64_t shifted = batch_norm_moments::shiftedSumsSize(c);
  doubles_ = ctx_.allocate(static_cast<size_t>(shifted + 5 * c) * sizeof(double));
  double* d = static_cast<double*>(doubles_.get());
  shifted_sums_ = d;
  deviations_ = d + shifted;
  moments_ = d + shifted + c;
  grad_sums_ = d + shifted + 3 * c;
  floats_ = ctx_.allocate(static_cast<size_t>(9 * c) * sizeof(float));
  float* f = static_cast<float*>(floats_.get());
  stats_out_ = {f, f + c};
  out_scale_ = f + 2 * c;
  out_shift_ = f + 3 * c;
  ones_ = f + 4 * c;
  zeros_ = f + 5 * c;
  dgamma_scratch_ = f + 6 * c;
  dbeta_scratch_ = f + 7 * c;
  shifts_ = f + 8 * c;
  ctx_.fill(f, 9 * c, 0.0f);
  ctx_.fill(ones_, c, 1.0f);
  param_descriptor_ = std::make_unique<CudnnTensorDescriptor>(1, c, 1, 1);
}

const CudnnTensorDescriptor& CudaBatchNorm::dataDescriptor(int64_t n) {
  auto found = data_descriptors_.find(n);
  if (found != data_descriptors_.end()) return found->second;
  // cuDNN's spatial mode reduces over N, H and W alike, so [n, C, H*W, 1]
  // describes the batch; [C] samples are [n, C, 1, 1].
  return data_descriptors_.emplace(n, CudnnTensorDescriptor(n, channels_, plane_, 1)).first->second;
}

void CudaBatchNorm::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  allocate();
  const Tensor& x = *in[0];
  if (ctx.training && ctx.stats_reducer) {
    forwardReduced(x, out, ctx);
    return;
  }
  if (ctx.training) {
    forwardCudnn(x, out, ctx);
    return;
  }
  const int64_t n = x.dim(0);
  if (n == 0) return;
  const cudnnTensorDescriptor_t xd = dataDescriptor(n).get();
  checkCudnn(cudnnBatchNormalizationForwardInference(
                 ctx_.cudnn(), plane_ > 1 ? CUDNN_BATCHNORM_SPATIAL : CUDNN_BATCHNORM_PER_ACTIVATION, &kOne,
                 &kZero, xd, x.data(), xd, out.data(), param_descriptor_->get(), gammaOrOnes(), betaOrZeros(),
                 running_mean_.data(), running_var_.data(), config_.epsilon),
             ("batch normalisation inference of " + layer_util::label(*this)).c_str());
  cuda::fusedActivationForward(out.data(), out.numel(), act_, ctx_.stream());
}

void CudaBatchNorm::forwardCudnn(const Tensor& x, Tensor& y, const LayerContext& ctx) {
  const int64_t n = x.dim(0);
  checkTrainingCount(static_cast<double>(n * plane_));
  const bool update = ctx.updates_buffers;
  const cudnnTensorDescriptor_t xd = dataDescriptor(n).get();
  checkCudnn(cudnnBatchNormalizationForwardTraining(
                 ctx_.cudnn(), plane_ > 1 ? CUDNN_BATCHNORM_SPATIAL : CUDNN_BATCHNORM_PER_ACTIVATION, &kOne,
                 &kZero, xd, x.data(), xd, y.data(), param_descriptor_->get(), gammaOrOnes(), betaOrZeros(),
                 config_.momentum, update ? running_mean_.data() : nullptr,
                 update ? running_var_.data() : nullptr, config_.epsilon, stats_out_.mean, stats_out_.invstd),
             ("batch normalisation forward of " + layer_util::label(*this)).c_str());
  cuda::fusedActivationForward(y.data(), y.numel(), act_, ctx_.stream());
}

void CudaBatchNorm::forwardReduced(const Tensor& x, Tensor& y, const LayerContext& ctx) {
  const cuda::BatchNormDims d = dims(x.dim(0));
  const cudaStream_t stream = ctx_.stream();
  const bool update = ctx.updates_buffers;
  const int64_t c = channels_, size = batch_norm_moments::shiftedSumsSize(c);
  cuda::batchNormShiftedSums(x.data(), d, running_mean_.data(), shifts_, shifted_sums_, stream);
  ctx.stats_reducer->allReduceSum(shifted_sums_, size);
  // The host reads the summed vector (waiting for the reduction) and decides
  // as the CPU layer does whether a second round is needed, so that every
  // rank asks its reducer for the same vectors.
  host_shifts_.resize(static_cast<size_t>(c));
  host_sums_.resize(static_cast<size_t>(size));
  host_moments_.resize(static_cast<size_t>(2 * c));
  ctx_.copy(host_shifts_.data(), shifts_, host_shifts_.size() * sizeof(float), true);
  ctx_.copy(host_sums_.data(), shifted_sums_, host_sums_.size() * sizeof(double), true);
  const double count = host_sums_[0];
  checkTrainingCount(count);
  double* mean = host_moments_.data();
  double* variance = mean + c;
  if (batch_norm_moments::fromShiftedSums(host_sums_.data(), host_shifts_.data(), c, *this, mean, variance)) {
    // The shift was far from the mean: the squared deviations from the
    // (float) mean itself, summed across the ranks, give the variance.
    host_mean_.resize(static_cast<size_t>(c));
    for (int64_t k = 0; k < c; ++k) host_mean_[k] = static_cast<float>(mean[k]);
    ctx_.copy(stats_out_.mean, host_mean_.data(), host_mean_.size() * sizeof(float), false);
    cuda::batchNormSquaredDeviations(x.data(), d, stats_out_.mean, deviations_, stream);
    ctx.stats_reducer->allReduceSum(deviations_, c);
    host_deviations_.resize(static_cast<size_t>(c));
    ctx_.copy(host_deviations_.data(), deviations_, host_deviations_.size() * sizeof(double), true);
    for (int64_t k = 0; k < c; ++k) variance[k] = host_deviations_[k] / count;
  }
  ctx_.copy(moments_, host_moments_.data(), host_moments_.size() * sizeof(double), false);
  cuda::batchNormBatchStatistics(
      moments_, count, c, config_.momentum, config_.epsilon, config_.scale ? gamma_.data() : nullptr,
      config_.center ? beta_.data() : nullptr, update ? running_mean_.data() : nullptr,
      update ? running_var_.data() : nullptr, stats_out_, out_scale_, out_shift_, stream);
  cuda::batchNormApply(x.data(), y.data(), d, stats_out_.mean, out_scale_, out_shift_, act_, stream);
}

void CudaBatchNorm::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                             const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (!din[0] && !config_.scale && !config_.center) return;
  allocate();
  if (ctx.training && !ctx.stats_reducer)
    backwardCudnn(*in[0], out, dout, din[0]);
  else
    backwardOwn(*in[0], out, dout, din[0], ctx);
}

void CudaBatchNorm::backwardCudnn(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  const int64_t n = x.dim(0), count = dy.numel();
  if (n == 0) return;
  const cudaStream_t stream = ctx_.stream();
  const float* g = dy.data();
  if (act_ != ops::FusedActivation::None) {
    float* masked = masked_.floats(count, dy.device());
    cuda::fusedActivationBackward(y.data(), g, masked, count, act_, stream);
    g = masked;
  }
  float* dx_data = dx ? dx->data() : unused_dx_.floats(count, dy.device());
  // cuDNN writes both parameter gradients with one blend factor: straight
  // into ours (+=) when the layer has both, else into scratch (=), added after.
  const bool both = config_.scale && config_.center;
  const float param_blend = both ? 1.0f : 0.0f;
  const cudnnTensorDescriptor_t xd = dataDescriptor(n).get();
  checkCudnn(cudnnBatchNormalizationBackward(
                 ctx_.cudnn(), plane_ > 1 ? CUDNN_BATCHNORM_SPATIAL : CUDNN_BATCHNORM_PER_ACTIVATION, &kOne,
                 &kZero, &kOne, &param_blend, xd, x.data(), xd, g, xd, dx_data, param_descriptor_->get(),
                 gammaOrOnes(), both ? dgamma_.data() : dgamma_scratch_,
                 both ? dbeta_.data() : dbeta_scratch_, config_.epsilon, stats_out_.mean, stats_out_.invstd),
             ("batch normalisation backward of " + layer_util::label(*this)).c_str());
  if (both) return;
  if (config_.scale) cuda::axpy(1.0f, dgamma_scratch_, dgamma_.data(), channels_, stream);
  if (config_.center) cuda::axpy(1.0f, dbeta_scratch_, dbeta_.data(), channels_, stream);
}

void CudaBatchNorm::backwardOwn(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                                const LayerContext& ctx) {
  const cuda::BatchNormDims d = dims(x.dim(0));
  const cudaStream_t stream = ctx_.stream();
  // At inference the pass normalised with the running statistics (cuDNN's
  // inference call keeps none for us).
  if (!ctx.training)
    cuda::batchNormFrozenStatistics(running_mean_.data(), running_var_.data(), channels_, config_.epsilon,
                                    stats_out_, stream);
  cuda::batchNormGradSums(x.data(), y.data(), dy.data(), d, act_, stats_out_, grad_sums_,
                          config_.scale ? dgamma_.data() : nullptr, config_.center ? dbeta_.data() : nullptr,
                          stream);
  if (!dx) return;  // every replica skips alike: the model is the same
  if (ctx.training) ctx.stats_reducer->allReduceSum(grad_sums_, 2 * channels_);
  cuda::batchNormInputGrad(x.data(), y.data(), dy.data(), d, act_, stats_out_,
                           config_.scale ? gamma_.data() : nullptr, ctx.training ? grad_sums_ : nullptr,
                           shifted_sums_, dx->data(), stream);
}

}  // namespace dtrain
