#include "core/nn/layers/embedding.h"

#include "core/backend/sequence_ops.h"
#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

Embedding::Embedding(std::string name, EmbeddingConfig config) : Layer(std::move(name)), config_(config) {
  if (config_.vocab <= 0 || config_.dim <= 0)
    throw ConfigError(layer_util::label(*this) + ": vocab and dim must be > 0");
}

std::unique_ptr<Layer> Embedding::create(const std::string& name, const LayerOptions& options,
                                         const LayerDefaults& defaults) {
  EmbeddingConfig c;
  c.vocab = options.getInt("vocab");
  if (c.vocab <= 0) options.fail("vocab", "vocab must be > 0 (got " + std::to_string(c.vocab) + ")");
  c.dim = options.getInt("dim");
  if (c.dim <= 0) options.fail("dim", "dim must be > 0 (got " + std::to_string(c.dim) + ")");
  c.init_std = layer_util::readInitStd(options);
  options.finish();
  return std::make_unique<Embedding>(name, c);
}

Shape Embedding::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  if (s.rank() != 1)
    throw ShapeError(layer_util::label(*this) + " expects a sequence of token ids [T], got " + s.str());
  tokens_ = s[0];
  return Shape{tokens_, config_.dim};
}

std::vector<ParamSpec> Embedding::paramSpecs() const {
  ParamSpec table{"weight", Shape{config_.vocab, config_.dim}, InitKind::Normal, config_.dim, config_.dim};
  table.embedding_table = true;
  table.init_std = config_.init_std;
  return {table};
}

void Embedding::bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  table_ = params.at(0);
  dtable_ = grads.at(0);
}

void Embedding::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t tokens = in[0]->dim(0) * tokens_;
  const float* ids = in[0]->data();
  const int64_t bad =
      ops::embeddingForward(ids, tokens, table_.data(), config_.vocab, config_.dim, out.data());
  if (bad >= 0)
    throw DataError(layer_util::label(*this) + ": token " + std::to_string(bad % tokens_) + " of sample " +
                    std::to_string(ctx.sample_offset + bad / tokens_) + " is " + std::to_string(ids[bad]) +
                    ", not an id in [0, " + std::to_string(config_.vocab) +
                    "); check the data's vocabulary against the model's vocab");
}

void Embedding::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                         const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (din[0]) din[0]->zero();  // ids have no gradient
  if (ctx.backward_part == BackwardPart::Inputs) return;
  ops::embeddingBackward(in[0]->data(), in[0]->dim(0) * tokens_, dout.data(), config_.dim, dtable_.data());
}

std::string Embedding::describe() const {
  return std::to_string(config_.vocab) + " x " + std::to_string(config_.dim);
}

}  // namespace dtrain
