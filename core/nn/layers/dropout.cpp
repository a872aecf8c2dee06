#include "core/nn/layers/dropout.h"

#include <cstdio>

#include "core/backend/ops.h"
#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

namespace {

bool validRate(double rate) { return rate >= 0.0 && rate < 1.0; }

std::string rateText(double rate) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", rate);
  return buf;
}

}  // namespace

Dropout::Dropout(std::string name, double rate) : Layer(std::move(name)), rate_(static_cast<float>(rate)) {
  if (!validRate(rate))
    throw ConfigError(layer_util::label(*this) + ": rate must be in [0, 1) (got " + rateText(rate) + ")");
}

std::unique_ptr<Layer> Dropout::create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults) {
  const double rate = options.getFloat("rate", 0.5);
  if (!validRate(rate)) options.fail("rate", "rate must be in [0, 1) (got " + rateText(rate) + ")");
  options.finish();
  return std::make_unique<Dropout>(name, rate);
}

Shape Dropout::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  elements_ = s.numel();
  return s;
}

void Dropout::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  if (!ctx.training || rate_ == 0.0f) {
    out.copyFrom(*in[0]);
    return;
  }
  maskForward(in[0]->data(), out.data(), in[0]->dim(0),
              ops::DropoutKey{ctx.seed, ctx.layer_index, ctx.sample_offset, ctx.step_scalars});
}

void Dropout::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                       const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (!din[0]) return;
  if (!ctx.training || rate_ == 0.0f) {
    din[0]->copyFrom(dout);
    return;
  }
  maskBackward(dout.data(), din[0]->data(), dout.dim(0),
               ops::DropoutKey{ctx.seed, ctx.layer_index, ctx.sample_offset, ctx.step_scalars});
}

void Dropout::maskForward(const float* x, float* y, int64_t rows, const ops::DropoutKey& key) {
  ops::dropoutForward(x, y, rows, elements_, rate_, key);
}

void Dropout::maskBackward(const float* dy, float* dx, int64_t rows, const ops::DropoutKey& key) {
  ops::dropoutBackward(dy, dx, rows, elements_, rate_, key);
}

std::string Dropout::describe() const { return "rate " + rateText(rate_); }

}  // namespace dtrain
