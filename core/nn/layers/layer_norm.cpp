#include "core/nn/layers/layer_norm.h"

#include <cstdio>

#include "core/backend/sequence_ops.h"
#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

std::unique_ptr<Layer> LayerNorm::create(const std::string& name, const LayerOptions& options,
                                         const LayerDefaults& defaults) {
  const double eps = options.getFloat("eps", 1e-5);
  if (!(eps > 0.0)) options.fail("eps", "eps must be > 0 (got " + std::to_string(eps) + ")");
  options.finish();
  return std::make_unique<LayerNorm>(name, static_cast<float>(eps));
}

Shape LayerNorm::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  if (s.rank() < 1 || s.numel() == 0)
    throw ShapeError(layer_util::label(*this) + " expects a non-empty input, got " + s.str());
  cols_ = s[s.rank() - 1];
  rows_per_sample_ = s.numel() / cols_;
  return s;
}

std::vector<ParamSpec> LayerNorm::paramSpecs() const {
  return {{"weight", Shape{cols_}, InitKind::Ones}, {"bias", Shape{cols_}, InitKind::Zeros}};
}

void LayerNorm::bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  weight_ = params.at(0);
  bias_ = params.at(1);
  dweight_ = grads.at(0);
  dbias_ = grads.at(1);
}

void LayerNorm::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t rows = in[0]->dim(0) * rows_per_sample_;
  float* stats = stats_.floats(2 * rows);
  ops::layerNormForward(in[0]->data(), rows, cols_, weight_.data(), bias_.data(), eps_, out.data(), stats,
                        stats + rows);
}

void LayerNorm::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                         const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const int64_t rows = in[0]->dim(0) * rows_per_sample_;
  const float* stats = stats_.floats(2 * rows);
  ops::layerNormBackward(in[0]->data(), dout.data(), rows, cols_, weight_.data(), stats, stats + rows,
                         din[0] ? din[0]->data() : nullptr, dweight_.data(), dbias_.data());
}

std::string LayerNorm::describe() const {
  char text[48];
  std::snprintf(text, sizeof text, "over %lld, eps %g", static_cast<long long>(cols_), eps_);
  return text;
}

}  // namespace dtrain
