#include "core/nn/layers/dense.h"

#include "core/backend/ops.h"
#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

Dense::Dense(std::string name, DenseConfig config) : Layer(std::move(name)), config_(config) {
  if (config_.units <= 0)
    throw ConfigError(layer_util::label(*this) + ": units must be > 0 (got " + std::to_string(config_.units) +
                      ")");
}

std::unique_ptr<Layer> Dense::create(const std::string& name, const LayerOptions& options,
                                     const LayerDefaults& defaults) {
  DenseConfig c;
  c.units = options.getInt("units");
  if (c.units <= 0) options.fail("units", "units must be > 0 (got " + std::to_string(c.units) + ")");
  c.bias = options.getBool("bias", true);
  c.tie = options.getString("tie", "");
  c.init = layer_util::readInit(options, defaults, /*allow_normal=*/true);
  if (c.init == InitKind::Normal)
    c.init_std = layer_util::readInitStd(options);
  else if (options.has("init_std"))
    options.fail("init_std", "init_std applies to init = \"normal\" only");
  options.finish();
  return std::make_unique<Dense>(name, c);
}

Shape Dense::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  // A sequence [T, C] is T rows of C (each token through the same weights);
  // an image must be flattened first: applying the weights along its last
  // axis alone is rarely what was meant.
  if (s.rank() != 1 && s.rank() != 2)
    throw ShapeError(layer_util::label(*this) + " expects a flat input or a sequence [T, C], got " + s.str() +
                     "; add a flatten layer before it");
  in_ = s[s.rank() - 1];
  rows_per_sample_ = s.rank() == 2 ? s[0] : 1;
  return s.rank() == 2 ? Shape{s[0], config_.units} : Shape{config_.units};
}

std::vector<ParamSpec> Dense::paramSpecs() const {
  std::vector<ParamSpec> specs;
  if (config_.tie.empty()) {
    specs.push_back({"weight", Shape{config_.units, in_}, config_.init, in_, config_.units});
    specs[0].init_std = config_.init_std;
  }
  if (config_.bias) specs.push_back({"bias", Shape{config_.units}, InitKind::Zeros, in_, config_.units});
  return specs;
}

void Dense::bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  const size_t own = config_.tie.empty() ? 1 : 0;
  if (own) {
    weight_ = params.at(0);
    dweight_ = grads.at(0);
  }
  if (config_.bias) {
    bias_ = params.at(own);
    dbias_ = grads.at(own);
  }
}

void Dense::bindTied(const Tensor& weight, const Tensor& grad) {
  weight_ = weight;
  dweight_ = grad;
}

bool Dense::fuseActivation(const std::string& type) {
  if (type != "relu" || relu_) return false;
  relu_ = true;
  return true;
}

void Dense::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0) * rows_per_sample_, units = config_.units;
  // One gemm for the whole slice: [n, in] x [in, units]; then bias (+ relu) in
  // one pass over the output.
  ops::gemm(false, true, n, units, in_, 1.0f, in[0]->data(), in_, weight_.data(), in_, 0.0f, out.data(),
            units);
  if (config_.bias || relu_)
    ops::biasActRows(out.data(), config_.bias ? bias_.data() : nullptr, n, units, relu_);
}

void Dense::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                     const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0) * rows_per_sample_, units = config_.units;
  // BackwardPart::Params comes with din null: the parameter gradients alone.
  const bool param_grads = ctx.backward_part != BackwardPart::Inputs;
  if (!param_grads && !din[0]) return;
  const float* dy = dout.data();
  if (relu_) {
    float* m = masked_.floats(n * units);
    ops::reluBackward(out.data(), dy, m, n * units);
    dy = m;
  }
  // dW += dY^T X, db += column sums of dY, dX = dY W.
  if (param_grads) {
    ops::gemm(true, false, units, in_, n, 1.0f, dy, units, in[0]->data(), in_, 1.0f, dweight_.data(), in_);
    if (config_.bias) ops::biasGradRows(dy, n, units, dbias_.data());
  }
  if (din[0])
    ops::gemm(false, false, n, in_, units, 1.0f, dy, units, weight_.data(), in_, 0.0f, din[0]->data(), in_);
}

int64_t Dense::forwardFlops() const {
  return rows_per_sample_ *
         (2 * config_.units * in_ + (config_.bias ? config_.units : 0) + (relu_ ? config_.units : 0));
}

std::string Dense::describe() const {
  std::string s = std::to_string(config_.units) + " units";
  if (rows_per_sample_ > 1) s += " per token";
  if (!config_.tie.empty()) s += ", weight tied to " + config_.tie;
  if (!config_.bias) s += ", no bias";
  if (relu_) s += ", relu fused";
  return s;
}

}  // namespace dtrain
