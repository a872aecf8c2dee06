#include "core/nn/layers/batch_norm.h"

#include <cmath>
#include <cstdio>

#include "core/errors.h"
#include "core/nn/layers/batch_norm_moments.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

namespace {

bool validMomentum(double m) { return m >= 0.0 && m <= 1.0; }  // false for NaN
bool validEpsilon(double e) { return e > 0.0 && std::isfinite(e); }

std::string numberText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string momentumError(double m) { return "momentum must be in [0, 1] (got " + numberText(m) + ")"; }
std::string epsilonError(double e) { return "epsilon must be > 0 (got " + numberText(e) + ")"; }

}  // namespace

BatchNorm::BatchNorm(std::string name, BatchNormConfig config) : Layer(std::move(name)), config_(config) {
  if (!validMomentum(config_.momentum))
    throw ConfigError(layer_util::label(*this) + ": " + momentumError(config_.momentum));
  if (!validEpsilon(config_.epsilon))
    throw ConfigError(layer_util::label(*this) + ": " + epsilonError(config_.epsilon));
}

std::unique_ptr<Layer> BatchNorm::create(const std::string& name, const LayerOptions& options,
                                         const LayerDefaults& defaults) {
  BatchNormConfig c;
  c.momentum = options.getFloat("momentum", c.momentum);
  if (!validMomentum(c.momentum)) options.fail("momentum", momentumError(c.momentum));
  c.epsilon = options.getFloat("epsilon", c.epsilon);
  if (!validEpsilon(c.epsilon)) options.fail("epsilon", epsilonError(c.epsilon));
  c.scale = options.getBool("scale", c.scale);
  c.center = options.getBool("center", c.center);
  options.finish();
  return std::make_unique<BatchNorm>(name, c);
}

Shape BatchNorm::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  if (s.rank() != 1 && s.rank() != 3)
    throw ShapeError(layer_util::label(*this) +
                     " expects an input [channels,height,width] or [features], got " + s.str());
  channels_ = s[0];
  plane_ = s.rank() == 3 ? s[1] * s[2] : 1;
  return s;
}

std::vector<ParamSpec> BatchNorm::paramSpecs() const {
  std::vector<ParamSpec> specs;
  if (config_.scale) specs.push_back({"weight", Shape{channels_}, InitKind::Ones});
  if (config_.center) specs.push_back({"bias", Shape{channels_}, InitKind::Zeros});
  return specs;
}

void BatchNorm::bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  size_t i = 0;
  if (config_.scale) {
    gamma_ = params.at(i);
    dgamma_ = grads.at(i);
    ++i;
  }
  if (config_.center) {
    beta_ = params.at(i);
    dbeta_ = grads.at(i);
  }
}

std::vector<ParamSpec> BatchNorm::bufferSpecs() const {
  return {{"running_mean", Shape{channels_}, InitKind::Zeros},
          {"running_var", Shape{channels_}, InitKind::Ones}};
}

void BatchNorm::bindBuffers(const std::vector<Tensor>& buffers) {
  running_mean_ = buffers.at(0);
  running_var_ = buffers.at(1);
}

bool BatchNorm::fuseActivation(const std::string& type) {
  if (act_ != ops::FusedActivation::None) return false;
  if (type == "relu")
    act_ = ops::FusedActivation::Relu;
  else if (type == "relu6")
    act_ = ops::FusedActivation::Relu6;
  else
    return false;
  return true;
}

bool BatchNorm::fuseResidualAdd() {
  // The activation must follow the sum: one fused before would apply to bn(x) alone.
  if (residual_ || act_ != ops::FusedActivation::None) return false;
  residual_ = true;
  return true;
}

void BatchNorm::checkTrainingCount(double count) const {
  if (count > 1.0) return;
  throw ShapeError(layer_util::label(*this) + ": training needs more than one value per channel, got " +
                   numberText(count) + (plane_ == 1 ? " (the batch size)" : "") + "; use a larger batch");
}

void BatchNorm::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const float* x = in[0]->data();
  const int64_t n = in[0]->dim(0), c = channels_;
  mean_.resize(c);
  batch_mean_.resize(c);
  invstd_.resize(c);
  scale_.resize(c);
  shift_.resize(c);
  const float* gamma = config_.scale ? gamma_.data() : nullptr;
  const float* beta = config_.center ? beta_.data() : nullptr;
  const float* rm = running_mean_.data();
  const float* rv = running_var_.data();
  if (!ctx.training) {
    for (int64_t k = 0; k < c; ++k) {
      mean_[k] = rm[k];
      invstd_[k] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(rv[k]) + config_.epsilon));
    }
  } else {
    // One round of [count, count * K, sum (x - K), sum (x - K)^2] per channel,
    // K = the running mean: every replica holds the same one, and it is near
    // the batch mean once training has run a little. It is copied first: the
    // replica that updates it does so as soon as the reduction returns.
    moment_shift_.assign(rm, rm + c);
    const int64_t size = batch_norm_moments::shiftedSumsSize(c);
    sums_.assign(static_cast<size_t>(size), 0.0);
    double* count_shift = sums_.data() + 1;
    double* shifted = count_shift + c;
    double* squares = shifted + c;
    sums_[0] = static_cast<double>(n * plane_);
    for (int64_t k = 0; k < c; ++k) count_shift[k] = sums_[0] * moment_shift_[k];
    ops::channelShiftedMoments(x, n, c, plane_, moment_shift_.data(), shifted, squares);
    if (ctx.stats_reducer) ctx.stats_reducer->allReduceSum(sums_.data(), size);
    const double count = sums_[0];
    checkTrainingCount(count);
    variance_.resize(static_cast<size_t>(c));
    const bool far_shift = batch_norm_moments::fromShiftedSums(sums_.data(), moment_shift_.data(), c, *this,
                                                               batch_mean_.data(), variance_.data());
    for (int64_t k = 0; k < c; ++k) mean_[k] = static_cast<float>(batch_mean_[k]);
    if (far_shift) {
      // sum (x - K)^2 - N d^2 cancels when K is far from the mean (early in
      // training, or after the data changed): a second round of squared
      // deviations from the mean itself, as precise as the inputs.
      deviations_.assign(static_cast<size_t>(c), 0.0);
      ops::channelSquaredDeviations(x, n, c, plane_, mean_.data(), deviations_.data());
      if (ctx.stats_reducer) ctx.stats_reducer->allReduceSum(deviations_.data(), c);
      for (int64_t k = 0; k < c; ++k) variance_[k] = deviations_[k] / count;
    }
    const double m = config_.momentum, unbiased = count / (count - 1.0);
    float* run_mean = running_mean_.data();
    float* run_var = running_var_.data();
    for (int64_t k = 0; k < c; ++k) {
      const double var = variance_[k];
      invstd_[k] = static_cast<float>(1.0 / std::sqrt(var + config_.epsilon));
      if (ctx.updates_buffers) {
        run_mean[k] = static_cast<float>((1.0 - m) * run_mean[k] + m * batch_mean_[k]);
        run_var[k] = static_cast<float>((1.0 - m) * run_var[k] + m * var * unbiased);
      }
    }
    count_ = count;
  }
  for (int64_t k = 0; k < c; ++k) {
    scale_[k] = gamma ? gamma[k] * invstd_[k] : invstd_[k];
    shift_[k] = beta ? beta[k] : 0.0f;
  }
  ops::batchNormApply(x, out.data(), n, c, plane_, mean_.data(), scale_.data(), shift_.data(),
                      residual_ ? in[1]->data() : nullptr, act_);
}

void BatchNorm::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                         const std::vector<Tensor*>& din, const LayerContext& ctx) {
  // The residual's gradient is the sum's, masked by the activation: y was
  // act(bn(x) + r), so the mask at y is the sum's.
  float* dresidual = residual_ && din[1] ? din[1]->data() : nullptr;
  const int64_t n = in[0]->dim(0), c = channels_;
  ops::BatchNormGradInputs g;
  g.x = in[0]->data();
  g.dy = dout.data();
  // Only a fused residual's output must be read for the mask; otherwise it
  // is recomputed from x with this forward's mean, scale and shift.
  g.y = residual_ ? out.data() : nullptr;
  g.n = n;
  g.channels = c;
  g.plane = plane_;
  g.act = act_;
  g.mean = mean_.data();
  g.scale = scale_.data();
  g.shift = shift_.data();
  if (!din[0] && !config_.scale && !config_.center) {
    if (dresidual) ops::fusedActivationGrad(out.data(), dout.data(), dresidual, dout.numel(), act_);
    return;
  }
  // This replica's sums of g and g * (x - mean); the parameter gradients take
  // them as they are: sum g * xhat = invstd * sum g * (x - mean). The same
  // pass writes the residual's gradient.
  grad_sums_.assign(static_cast<size_t>(2 * c), 0.0);
  double* sum_g = grad_sums_.data();
  double* sum_g_dev = grad_sums_.data() + c;
  ops::batchNormGradSums(g, sum_g, sum_g_dev, dresidual);
  if (config_.scale) {
    float* dgamma = dgamma_.data();
    for (int64_t k = 0; k < c; ++k) dgamma[k] += static_cast<float>(invstd_[k] * sum_g_dev[k]);
  }
  if (config_.center) {
    float* dbeta = dbeta_.data();
    for (int64_t k = 0; k < c; ++k) dbeta[k] += static_cast<float>(sum_g[k]);
  }
  if (!din[0]) return;  // every replica skips alike: the model is the same
  // dx = a * g + b * (x - mean) + c. At inference the statistics are
  // constants: dx = gamma * invstd * g. In training they depend on every x of
  // the batch: dx = gamma * invstd * (g - sum g / N - xhat * sum (g * xhat) / N).
  coef_a_.resize(c);
  coef_b_.resize(c);
  coef_c_.resize(c);
  if (ctx.training && ctx.stats_reducer) ctx.stats_reducer->allReduceSum(grad_sums_.data(), 2 * c);
  const float* gamma = config_.scale ? gamma_.data() : nullptr;
  for (int64_t k = 0; k < c; ++k) {
    const double r = invstd_[k], a = (gamma ? gamma[k] : 1.0) * r;
    coef_a_[k] = static_cast<float>(a);
    coef_b_[k] = ctx.training ? static_cast<float>(-a * r * r * sum_g_dev[k] / count_) : 0.0f;
    coef_c_[k] = ctx.training ? static_cast<float>(-a * sum_g[k] / count_) : 0.0f;
  }
  if (dresidual) {  // g is already masked there: read it instead of y and dy
    g.dy = dresidual;
    g.y = nullptr;
    g.act = ops::FusedActivation::None;
  }
  ops::batchNormInputGrad(g, coef_a_.data(), coef_b_.data(), coef_c_.data(), din[0]->data());
}

int64_t BatchNorm::forwardFlops() const {
  const int64_t elements = channels_ * plane_;
  return 2 * elements + (residual_ ? elements : 0) + (act_ == ops::FusedActivation::None ? 0 : elements);
}

std::string BatchNorm::describe() const {
  std::string s = "momentum " + numberText(config_.momentum) + ", epsilon " + numberText(config_.epsilon);
  if (!config_.scale) s += ", no scale";
  if (!config_.center) s += ", no center";
  if (residual_) s += ", add fused";
  if (act_ == ops::FusedActivation::Relu) s += ", relu fused";
  if (act_ == ops::FusedActivation::Relu6) s += ", relu6 fused";
  return s;
}

}  // namespace dtrain
