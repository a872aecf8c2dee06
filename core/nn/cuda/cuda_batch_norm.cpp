#include "core/nn/cuda/cuda_batch_norm.h"

#include <cstdio>
#include <exception>
#include <string>

#include "core/backend/algorithm_cache.h"
#include "core/backend/cuda/cudnn_handle.h"
#include "core/backend/cuda/fill_kernels.h"
#include "core/backend/cuda/median_time.h"
#include "core/errors.h"
#include "core/nn/layers/batch_norm_moments.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

namespace {

const float kOne = 1.0f, kZero = 0.0f;

const char* activationName(ops::FusedActivation act) {
  switch (act) {
    case ops::FusedActivation::None:
      return "none";
    case ops::FusedActivation::Relu:
      return "relu";
    case ops::FusedActivation::Relu6:
      return "relu6";
  }
  return "?";
}

// The kernels read every tensor of the batch as x's element type, so one of
// another type (not Model's contract) is refused rather than misread.
void checkElementType(const Layer& layer, const Tensor& x, const Tensor* t, const char* what) {
  if (!t || t->dtype() == x.dtype()) return;
  throw ShapeError(layer_util::label(layer) + ": " + what + " is " + dtypeName(t->dtype()) + ", x " +
                   dtypeName(x.dtype()) + " (a batch_norm's activations share one element type)");
}

// 16-bit activations: float per-channel values with bf16 or fp16 data.
bool sixteenBit(const Tensor& x) { return x.dtype() != DType::F32; }

}  // namespace

CudaBatchNorm::CudaBatchNorm(const BatchNorm& cpu, CudaContext& ctx, const GpuLayerOptions& options)
    : BatchNorm(cpu.name(), cpu.config()), ctx_(ctx), options_(options) {}
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
  floats_ = ctx_.allocate(static_cast<size_t>(13 * c) * sizeof(float));
  float* f = static_cast<float*>(floats_.get());
  stats_out_ = {f, f + c};
  out_scale_ = f + 2 * c;
  out_shift_ = f + 3 * c;
  ones_ = f + 4 * c;
  zeros_ = f + 5 * c;
  dgamma_scratch_ = f + 6 * c;
  dbeta_scratch_ = f + 7 * c;
  shifts_ = f + 8 * c;
  frozen_ = {f + 9 * c, f + 10 * c};
  frozen_scale_ = f + 11 * c;
  frozen_shift_ = f + 12 * c;
  ctx_.fill(f, 13 * c, 0.0f);
  ctx_.fill(ones_, c, 1.0f);
  param_descriptor_ = std::make_unique<CudnnTensorDescriptor>(1, c, 1, 1);
}

const CudnnTensorDescriptor& CudaBatchNorm::dataDescriptor(int64_t n, DType dtype) {
  const auto key = std::make_pair(n, dtype);
  auto found = data_descriptors_.find(key);
  if (found != data_descriptors_.end()) return found->second;
  // cuDNN's spatial mode reduces over N, H and W alike, so [n, C, H*W, 1]
  // describes the batch; [C] samples are [n, C, 1, 1].
  return data_descriptors_
      .emplace(key, CudnnTensorDescriptor(n, channels_, plane_, 1, cudnnDataTypeOf(dtype)))
      .first->second;
}

void CudaBatchNorm::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  allocate();
  const Tensor& x = *in[0];
  checkElementType(*this, x, &out, "y");
  if (residual_) checkElementType(*this, x, in[1], "the residual");
  const void* residual = residual_ ? in[1]->raw() : nullptr;
  if (ctx.training && ctx.stats_reducer) {
    forwardReduced(x, out, residual, ctx);
    return;
  }
  const int64_t n = x.dim(0);
  if (ctx.training) {
    checkTrainingCount(static_cast<double>(n * plane_));
    last_path_ = pathFor(x, out, residual);
    if (last_path_ == BatchNormPath::Cudnn)
      forwardCudnn(x, out, residual, ctx.updates_buffers);
    else
      forwardOwn(x, out, residual, ctx.updates_buffers);
    return;
  }
  if (n == 0) return;
  if (sixteenBit(x)) {
    // Our kernels, which round act(bn(x) + residual) once (cuda_batch_norm.h).
    forwardFrozenOwn(x, out, residual);
    return;
  }
  const cudnnTensorDescriptor_t xd = dataDescriptor(n, x.dtype()).get();
  checkCudnn(cudnnBatchNormalizationForwardInference(
                 ctx_.cudnn(), plane_ > 1 ? CUDNN_BATCHNORM_SPATIAL : CUDNN_BATCHNORM_PER_ACTIVATION, &kOne,
                 &kZero, xd, x.raw(), xd, out.raw(), param_descriptor_->get(), gammaOrOnes(), betaOrZeros(),
                 running_mean_.data(), running_var_.data(), config_.epsilon),
             ("batch normalisation inference of " + layer_util::label(*this)).c_str());
  cuda::fusedActivationForward(out.raw(), residual, out.dtype(), out.numel(), act_, ctx_.stream());
}

void CudaBatchNorm::forwardFrozenOwn(const Tensor& x, Tensor& y, const void* residual) {
  const cudaStream_t stream = ctx_.stream();
  cuda::batchNormFrozenStatistics(running_mean_.data(), running_var_.data(), channels_, config_.epsilon,
                                  config_.scale ? gamma_.data() : nullptr,
                                  config_.center ? beta_.data() : nullptr, frozen_, frozen_scale_,
                                  frozen_shift_, stream);
  cuda::batchNormApply(x.raw(), y.raw(), dims(x), frozen_.mean, frozen_scale_, frozen_shift_, residual, act_,
                       stream);
}

BatchNormPath CudaBatchNorm::pathFor(const Tensor& x, Tensor& y, const void* residual) {
  const int64_t n = x.dim(0);
  if (residual && sixteenBit(x)) {
    // cuDNN would round bn(x) to 16 bits before the add (cuda_batch_norm.h).
    if (!chosen_.count(n))
      chosen_[n] = Chosen{BatchNormPath::Own, -1.0, -1.0, false, "cuDNN cannot add the residual in 16 bits"};
    return BatchNormPath::Own;
  }
  if (forced_path_) return *forced_path_;
  auto found = chosen_.find(n);
  if (found != chosen_.end()) return found->second.path;
  BatchNormAlgorithmKey key;
  key.batch = n;
  key.channels = channels_;
  key.plane = plane_;
  key.activation = activationName(act_);
  key.residual = residual != nullptr;
  key.data = x.dtype();  // a 16-bit batch moves half the bytes: its own timing
  const std::string text = algorithmKey(key);
  if (options_.algorithms) {
    const std::optional<AlgorithmChoice> cached = options_.algorithms->find(text);
    if (cached && (cached->algo == static_cast<int64_t>(BatchNormPath::Cudnn) ||
                   cached->algo == static_cast<int64_t>(BatchNormPath::Own))) {
      const auto path = static_cast<BatchNormPath>(cached->algo);
      chosen_[n] = Chosen{path, cached->time_ms, -1.0, true};
      return path;
    }
  }
  const double cudnn_ms = timePath(BatchNormPath::Cudnn, x, y, residual);
  const double own_ms = timePath(BatchNormPath::Own, x, y, residual);
  // cuDNN, the path from before there was a choice, unless ours is faster
  // (or cuDNN could not be timed).
  const bool own = own_ms >= 0 && (cudnn_ms < 0 || own_ms < cudnn_ms);
  const Chosen chosen{own ? BatchNormPath::Own : BatchNormPath::Cudnn, own ? own_ms : cudnn_ms,
                      own ? cudnn_ms : own_ms, false};
  chosen_[n] = chosen;
  if (options_.algorithms && chosen.time_ms >= 0) {
    AlgorithmChoice record;
    record.algo = static_cast<int64_t>(chosen.path);
    record.time_ms = chosen.time_ms;
    options_.algorithms->record(text, record);
  }
  return chosen.path;
}

double CudaBatchNorm::timePath(BatchNormPath path, const Tensor& x, Tensor& y, const void* residual) {
  const int64_t count = x.numel();
  void* dx = unused_dx_.elements(count, x.dtype(), x.device());
  void* dresidual = residual ? unused_dresidual_.elements(count, x.dtype(), x.device()) : nullptr;
  // y serves as the output gradient (any values take the same time); the
  // running statistics are not updated and the parameter gradients go to
  // scratch, so the layer's state is as if the run had not happened. y and
  // the per-pass statistics are overwritten by the pass that follows.
  return medianMilliseconds(ctx_.stream(), 3, [&] {
    try {
      if (path == BatchNormPath::Cudnn) {
        forwardCudnn(x, y, residual, false);
        backwardCudnn(x, y, y, dx, dresidual, Into::Scratch);
      } else {
        forwardOwn(x, y, residual, false);
        backwardOwn(x, y, y, dx, dresidual, Into::Scratch, true, nullptr);
      }
      return cudaGetLastError() == cudaSuccess;
    } catch (const std::exception&) {
      return false;
    }
  });
}

std::string CudaBatchNorm::algorithmName(int64_t batch) const {
  auto found = chosen_.find(batch);
  if (found != chosen_.end() && found->second.untimed)
    return std::string(batchNormPathName(found->second.path)) + " (" + found->second.untimed + ")";
  if (forced_path_) return std::string(batchNormPathName(*forced_path_)) + " (forced)";
  if (found == chosen_.end()) return "";
  const Chosen& c = found->second;
  std::string text = batchNormPathName(c.path);
  const BatchNormPath other = c.path == BatchNormPath::Cudnn ? BatchNormPath::Own : BatchNormPath::Cudnn;
  char ms[96];
  if (c.cached)
    std::snprintf(ms, sizeof ms, " (cached, %.3f ms)", c.time_ms);
  else if (c.time_ms < 0)
    std::snprintf(ms, sizeof ms, " (neither path could be timed)");
  else if (c.other_ms < 0)
    std::snprintf(ms, sizeof ms, " %.3f ms (%s could not be timed)", c.time_ms, batchNormPathName(other));
  else
    std::snprintf(ms, sizeof ms, " %.3f ms (%s %.3f ms)", c.time_ms, batchNormPathName(other), c.other_ms);
  return text + ms;
}

void CudaBatchNorm::forwardCudnn(const Tensor& x, Tensor& y, const void* residual, bool update) {
  const int64_t n = x.dim(0);
  const cudnnTensorDescriptor_t xd = dataDescriptor(n, x.dtype()).get();
  checkCudnn(cudnnBatchNormalizationForwardTraining(
                 ctx_.cudnn(), plane_ > 1 ? CUDNN_BATCHNORM_SPATIAL : CUDNN_BATCHNORM_PER_ACTIVATION, &kOne,
                 &kZero, xd, x.raw(), xd, y.raw(), param_descriptor_->get(), gammaOrOnes(), betaOrZeros(),
                 config_.momentum, update ? running_mean_.data() : nullptr,
                 update ? running_var_.data() : nullptr, config_.epsilon, stats_out_.mean, stats_out_.invstd),
             ("batch normalisation forward of " + layer_util::label(*this)).c_str());
  // In 16 bits no residual comes here (pathFor), only the activation.
  cuda::fusedActivationForward(y.raw(), residual, y.dtype(), y.numel(), act_, ctx_.stream());
}

void CudaBatchNorm::forwardOwn(const Tensor& x, Tensor& y, const void* residual, bool update) {
  const cuda::BatchNormDims d = dims(x);
  const cudaStream_t stream = ctx_.stream();
  const int64_t c = channels_;
  // All on the device: the moments come from the sums without the host, so
  // nothing waits for the stream (see batchNormMomentsFromShiftedSums for why
  // one round suffices here).
  cuda::batchNormShiftedSums(x.raw(), d, running_mean_.data(), shifts_, shifted_sums_, stream);
  cuda::batchNormMomentsFromShiftedSums(shifted_sums_, shifts_, c, moments_, stream);
  cuda::batchNormBatchStatistics(
      moments_, static_cast<double>(d.n * d.plane), c, config_.momentum, config_.epsilon,
      config_.scale ? gamma_.data() : nullptr, config_.center ? beta_.data() : nullptr,
      update ? running_mean_.data() : nullptr, update ? running_var_.data() : nullptr, stats_out_, out_scale_,
      out_shift_, stream);
  cuda::batchNormApply(x.raw(), y.raw(), d, stats_out_.mean, out_scale_, out_shift_, residual, act_, stream);
}

void CudaBatchNorm::forwardReduced(const Tensor& x, Tensor& y, const void* residual,
                                   const LayerContext& ctx) {
  const cuda::BatchNormDims d = dims(x);
  const cudaStream_t stream = ctx_.stream();
  const bool update = ctx.updates_buffers;
  const int64_t c = channels_, size = batch_norm_moments::shiftedSumsSize(c);
  cuda::batchNormShiftedSums(x.raw(), d, running_mean_.data(), shifts_, shifted_sums_, stream);
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
    cuda::batchNormSquaredDeviations(x.raw(), d, stats_out_.mean, deviations_, stream);
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
  cuda::batchNormApply(x.raw(), y.raw(), d, stats_out_.mean, out_scale_, out_shift_, residual, act_, stream);
}

void CudaBatchNorm::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                             const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const Tensor& x = *in[0];
  checkElementType(*this, x, &out, "y");
  checkElementType(*this, x, &dout, "dy");
  checkElementType(*this, x, din[0], "dx");
  if (residual_) checkElementType(*this, x, din[1], "the residual's gradient");
  void* dx = din[0] ? din[0]->raw() : nullptr;
  void* dresidual = residual_ && din[1] ? din[1]->raw() : nullptr;
  if (!dx && !dresidual && !config_.scale && !config_.center) return;
  allocate();
  if (ctx.training && !ctx.stats_reducer && last_path_ == BatchNormPath::Cudnn)
    backwardCudnn(x, out, dout, dx, dresidual, Into::Params);
  else
    backwardOwn(x, out, dout, dx, dresidual, Into::Params, ctx.training, ctx.stats_reducer);
}

void CudaBatchNorm::backwardCudnn(const Tensor& x, const Tensor& y, const Tensor& dy, void* dx,
                                  void* dresidual, Into into) {
  const int64_t n = x.dim(0), count = dy.numel();
  if (n == 0) return;
  const cudaStream_t stream = ctx_.stream();
  const DType type = dy.dtype();
  // In 16 bits: the masked gradient (dy or 0, exact) and cuDNN's dx are of
  // the data's type, dx rounded once by cuDNN; the parameter gradients float.
  const void* g = dy.raw();
  if (act_ != ops::FusedActivation::None || dresidual) {
    // The masked gradient is the residual's: written there when it is wanted.
    void* masked = dresidual ? dresidual : masked_.elements(count, type, dy.device());
    cuda::fusedActivationBackward(y.raw(), g, masked, type, count, act_, stream);
    g = masked;
  }
  void* dx_data = dx ? dx : unused_dx_.elements(count, type, dy.device());
  // cuDNN writes both parameter gradients with one blend factor: straight
  // into ours (+=) when the layer has both, else into scratch (=), added after.
  const bool both = config_.scale && config_.center && into == Into::Params;
  const float param_blend = both ? 1.0f : 0.0f;
  const cudnnTensorDescriptor_t xd = dataDescriptor(n, x.dtype()).get();
  checkCudnn(cudnnBatchNormalizationBackward(
                 ctx_.cudnn(), plane_ > 1 ? CUDNN_BATCHNORM_SPATIAL : CUDNN_BATCHNORM_PER_ACTIVATION, &kOne,
                 &kZero, &kOne, &param_blend, xd, x.raw(), xd, g, xd, dx_data, param_descriptor_->get(),
                 gammaOrOnes(), both ? dgamma_.data() : dgamma_scratch_,
                 both ? dbeta_.data() : dbeta_scratch_, config_.epsilon, stats_out_.mean, stats_out_.invstd),
             ("batch normalisation backward of " + layer_util::label(*this)).c_str());
  if (both || into == Into::Scratch) return;
  if (config_.scale) cuda::axpy(1.0f, dgamma_scratch_, dgamma_.data(), channels_, stream);
  if (config_.center) cuda::axpy(1.0f, dbeta_scratch_, dbeta_.data(), channels_, stream);
}

void CudaBatchNorm::backwardOwn(const Tensor& x, const Tensor& y, const Tensor& dy, void* dx,
                                void* dresidual, Into into, bool training, StatsReducer* reducer) {
  const cuda::BatchNormDims d = dims(x);
  const cudaStream_t stream = ctx_.stream();
  // At inference the pass normalised with the running statistics (cuDNN's
  // inference call keeps none for us).
  if (!training)
    cuda::batchNormFrozenStatistics(running_mean_.data(), running_var_.data(), channels_, config_.epsilon,
                                    nullptr, nullptr, frozen_, nullptr, nullptr, stream);
  const cuda::BatchNormStats stats = training ? stats_out_ : frozen_;
  if (dresidual)
    cuda::fusedActivationBackward(y.raw(), dy.raw(), dresidual, dy.dtype(), dy.numel(), act_, stream);
  const bool params = into == Into::Params;
  cuda::batchNormGradSums(x.raw(), y.raw(), dy.raw(), d, act_, stats, grad_sums_,
                          config_.scale ? (params ? dgamma_.data() : dgamma_scratch_) : nullptr,
                          config_.center ? (params ? dbeta_.data() : dbeta_scratch_) : nullptr, stream);
  if (!dx) return;  // every replica skips alike: the model is the same
  // Without a reducer this process's sums are the whole batch's.
  if (training && reducer) reducer->allReduceSum(grad_sums_, 2 * channels_);
  cuda::batchNormInputGrad(x.raw(), y.raw(), dy.raw(), d, act_, stats,
                           config_.scale ? gamma_.data() : nullptr, training ? grad_sums_ : nullptr,
                           shifted_sums_, dx, stream);
}

}  // namespace dtrain
