#include "core/nn/layers/position_embedding.h"

#include <algorithm>

#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

std::unique_ptr<Layer> PositionEmbedding::create(const std::string& name, const LayerOptions& options,
                                                 const LayerDefaults& defaults) {
  PositionEmbeddingConfig c;
  c.context = options.getInt("context");
  if (c.context <= 0) options.fail("context", "context must be > 0 (got " + std::to_string(c.context) + ")");
  c.init_std = layer_util::readInitStd(options);
  options.finish();
  return std::make_unique<PositionEmbedding>(name, c);
}

Shape PositionEmbedding::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  if (s.rank() != 2)
    throw ShapeError(layer_util::label(*this) + " expects a sequence [T, dim], got " + s.str());
  if (s[0] > config_.context)
    throw ShapeError(layer_util::label(*this) + ": sequences of " + std::to_string(s[0]) +
                     " tokens exceed its context of " + std::to_string(config_.context) +
                     " positions; raise its context (a checkpoint's table cannot grow)");
  tokens_ = s[0];
  dim_ = s[1];
  return s;
}

std::vector<ParamSpec> PositionEmbedding::paramSpecs() const {
  ParamSpec table{"weight", Shape{config_.context, dim_}, InitKind::Normal, dim_, dim_};
  table.embedding_table = true;
  table.init_std = config_.init_std;
  return {table};
}

void PositionEmbedding::bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  table_ = params.at(0);
  dtable_ = grads.at(0);
}

void PositionEmbedding::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0), per_sample = tokens_ * dim_;
  if (ctx.decode_position >= config_.context)
    throw Error(layer_util::label(*this) + ": position " + std::to_string(ctx.decode_position) +
                " is beyond its context of " + std::to_string(config_.context));
  // Decoding one token: its position's row.
  const float* __restrict table = table_.data() + std::max<int64_t>(ctx.decode_position, 0) * dim_;
  for (int64_t s = 0; s < n; ++s) {
    const float* __restrict x = in[0]->data() + s * per_sample;
    float* __restrict y = out.data() + s * per_sample;
    for (int64_t i = 0; i < per_sample; ++i) y[i] = x[i] + table[i];
  }
}

void PositionEmbedding::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                                 const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const int64_t n = dout.dim(0), per_sample = tokens_ * dim_;
  if (din[0] && din[0]->data() != dout.data()) din[0]->copyFrom(dout);
  if (ctx.backward_part == BackwardPart::Inputs) return;
  float* __restrict dtable = dtable_.data();
  for (int64_t s = 0; s < n; ++s) {
    const float* __restrict dy = dout.data() + s * per_sample;
    for (int64_t i = 0; i < per_sample; ++i) dtable[i] += dy[i];
  }
}

std::string PositionEmbedding::describe() const {
  return std::to_string(config_.context) + " positions x " + std::to_string(dim_);
}

}  // namespace dtrain
