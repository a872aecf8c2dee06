#include "core/nn/layers/causal_self_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/backend/attention_ops.h"
#include "core/backend/dropout_mask.h"
#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

CausalSelfAttention::CausalSelfAttention(std::string name, CausalSelfAttentionConfig config)
    : Layer(std::move(name)), config_(config) {
  if (config_.heads <= 0) throw ConfigError(layer_util::label(*this) + ": heads must be > 0");
  if (!(config_.dropout >= 0.0 && config_.dropout < 1.0))
    throw ConfigError(layer_util::label(*this) + ": dropout must be in [0, 1)");
}

std::unique_ptr<Layer> CausalSelfAttention::create(const std::string& name, const LayerOptions& options,
                                                   const LayerDefaults& defaults) {
  CausalSelfAttentionConfig c;
  c.heads = options.getInt("heads");
  if (c.heads <= 0) options.fail("heads", "heads must be > 0 (got " + std::to_string(c.heads) + ")");
  c.dropout = options.getFloat("dropout", 0.0);
  if (!(c.dropout >= 0.0 && c.dropout < 1.0))
    options.fail("dropout", "dropout must be in [0, 1) (got " + std::to_string(c.dropout) + ")");
  options.finish();
  return std::make_unique<CausalSelfAttention>(name, c);
}

Shape CausalSelfAttention::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  if (s.rank() != 2 || s[1] % 3 != 0)
    throw ShapeError(layer_util::label(*this) + " expects [T, 3C] (each token's query, key and value), got " +
                     s.str() + "; put a dense layer of 3C units before it");
  tokens_ = s[0];
  channels_ = s[1] / 3;
  if (channels_ % config_.heads != 0)
    throw ShapeError(layer_util::label(*this) + ": " + std::to_string(config_.heads) +
                     " heads do not divide " + std::to_string(channels_) + " channels");
  return Shape{tokens_, channels_};
}

ops::AttentionDropout CausalSelfAttention::dropoutOf(const LayerContext& ctx) const {
  ops::AttentionDropout d;
  if (!ctx.training || config_.dropout <= 0.0) return d;
  d.rate = static_cast<float>(config_.dropout);
  d.seed = dropout_mask::layerKey(ctx.seed, ctx.layer_index);
  d.sample_offset = ctx.sample_offset;
  return d;
}

void CausalSelfAttention::forward(const std::vector<const Tensor*>& in, Tensor& out,
                                  const LayerContext& ctx) {
  if (ctx.decode_position >= 0) return decodeStep(*in[0], out, ctx.decode_position);
  const ops::AttentionShape s = shapeOf(*in[0]);
  ops::causalAttentionForward(s, in[0]->data(), out.data(), lse_.floats(s.batch * s.heads * s.seq),
                              dropoutOf(ctx), scratch_.floats(ops::attentionScratchFloats(s)));
}

void CausalSelfAttention::backward(const std::vector<const Tensor*>& in, const Tensor& out,
                                   const Tensor& dout, const std::vector<Tensor*>& din,
                                   const LayerContext& ctx) {
  if (!din[0]) return;  // no parameters: nothing else to compute
  const ops::AttentionShape s = shapeOf(*in[0]);
  ops::causalAttentionBackward(s, in[0]->data(), out.data(), dout.data(),
                               lse_.floats(s.batch * s.heads * s.seq), din[0]->data(), dropoutOf(ctx),
                               scratch_.floats(ops::attentionScratchFloats(s)));
}

void CausalSelfAttention::decodeStep(const Tensor& qkv, Tensor& out, int64_t position) {
  const int64_t n = qkv.dim(0), c = channels_, head = c / config_.heads;
  if (tokens_ != 1)
    throw Error(layer_util::label(*this) + ": decoding feeds one token at a time, not " +
                std::to_string(tokens_));
  // Position 0 starts new sequences; later positions extend the cached ones.
  if (position == 0) {
    cached_samples_ = n;
    cached_positions_ = 0;
  }
  if (n != cached_samples_ || position != cached_positions_)
    throw Error(layer_util::label(*this) + ": decoding position " + std::to_string(position) + " of " +
                std::to_string(n) + " sequences follows " + std::to_string(cached_positions_) +
                " cached positions of " + std::to_string(cached_samples_));
  const int64_t positions = position + 1;
  // Grown by doubling, so a long generation copies each entry O(1) times.
  const int64_t capacity = n > 0 ? static_cast<int64_t>(keys_.size()) / (n * c) : 0;
  if (capacity < positions) {
    const int64_t grown = std::max<int64_t>(2 * capacity, 16);
    std::vector<float> keys(static_cast<size_t>(n * grown * c)), values(keys.size());
    for (int64_t s = 0; s < n; ++s) {
      std::copy_n(keys_.data() + s * capacity * c, cached_positions_ * c, keys.data() + s * grown * c);
      std::copy_n(values_.data() + s * capacity * c, cached_positions_ * c, values.data() + s * grown * c);
    }
    keys_.swap(keys);
    values_.swap(values);
  }
  const int64_t stride = static_cast<int64_t>(keys_.size()) / (n * c);  // positions a sample holds
  const float scale = 1.0f / std::sqrt(static_cast<float>(head));
  scores_.resize(static_cast<size_t>(positions));
  for (int64_t s = 0; s < n; ++s) {
    const float* row = qkv.data() + s * 3 * c;
    float* keys = keys_.data() + s * stride * c;
    float* values = values_.data() + s * stride * c;
    std::copy(row + c, row + 2 * c, keys + position * c);
    std::copy(row + 2 * c, row + 3 * c, values + position * c);
    for (int64_t h = 0; h < config_.heads; ++h) {
      const float* q = row + h * head;
      // An exact softmax as in training: scaled scores, their maximum
      // subtracted, exponentials normalised by their sum.
      float top = -INFINITY;
      for (int64_t p = 0; p < positions; ++p) {
        float dot = 0.0f;
        for (int64_t d = 0; d < head; ++d) dot += q[d] * keys[p * c + h * head + d];
        scores_[static_cast<size_t>(p)] = dot * scale;
        top = std::max(top, dot * scale);
      }
      double sum = 0.0;
      for (float& v : scores_) sum += (v = std::exp(v - top));
      float* o = out.data() + s * c + h * head;
      std::fill(o, o + head, 0.0f);
      for (int64_t p = 0; p < positions; ++p) {
        const float w = static_cast<float>(scores_[static_cast<size_t>(p)] / sum);
        for (int64_t d = 0; d < head; ++d) o[d] += w * values[p * c + h * head + d];
      }
    }
  }
  cached_positions_ = positions;
}

int64_t CausalSelfAttention::forwardFlops() const {
  // Q K^T and P V over the causal half: 2 products of T^2/2 x head_dim per head.
  return 2 * tokens_ * (tokens_ + 1) / 2 * channels_ * 2;
}

std::string CausalSelfAttention::describe() const {
  char text[96];
  std::snprintf(text, sizeof text, "%lld heads of %lld, causal", static_cast<long long>(config_.heads),
                static_cast<long long>(channels_ / config_.heads));
  std::string s = text;
  if (config_.dropout > 0) s += ", dropout " + std::to_string(config_.dropout).substr(0, 4);
  return s;
}

}  // namespace dtrain
