// causal_self_attention: multi-head scaled dot-product attention in which
// each position sees itself and the positions before it (a GPT decoder's).
// Input [T, 3C]: each token's query, key and value side by side (a dense
// layer of 3C units before it computes them), head h in columns
// [h*C/heads, (h+1)*C/heads) of each; output [T, C], heads side by side (a
// dense layer after it projects them). Options: heads (> 0, dividing C),
// dropout (on the attention probabilities in training, default 0).
// Memory stays linear in T: the kernel (core/backend/attention_ops.h) never
// stores the T x T scores; backward recomputes them from the inputs and each
// row's log-sum-exp, which forward keeps.
//
// Generation (LayerContext::decode_position) feeds one token per sample at
// a time: the layer keeps every earlier position's keys and values, so a
// sequence of N tokens costs N steps of one query each, not N full passes.
//
// Ownership and threading: as every Layer; the log-sum-exp, the kernel's
// scratch and the decoding cache are this instance's.
#pragma once
#include <vector>

#include "core/backend/attention_ops.h"
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"
#include "core/nn/layers/scratch.h"

namespace dtrain {

struct CausalSelfAttentionConfig {
  int64_t heads = 0;
  double dropout = 0.0;
};

class CausalSelfAttention : public Layer {
 public:
  CausalSelfAttention(std::string name, CausalSelfAttentionConfig config);
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "causal_self_attention"; }
  Shape setup(const std::vector<Shape>& inputs) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  int64_t forwardFlops() const override;
  std::string describe() const override;
  const CausalSelfAttentionConfig& config() const { return config_; }

 protected:
  // The probabilities' dropout of a pass (none in inference or at rate 0),
  // keyed as every implementation's mask must be.
  ops::AttentionDropout dropoutOf(const LayerContext& ctx) const;
  ops::AttentionShape shapeOf(const Tensor& qkv) const {
    return ops::AttentionShape{qkv.dim(0), tokens_, config_.heads, channels_ / config_.heads};
  }

  CausalSelfAttentionConfig config_;
  int64_t tokens_ = 0, channels_ = 0;

 private:
  // One token per sample at ctx.decode_position, against this instance's
  // cache of the earlier positions' keys and values (which it extends).
  void decodeStep(const Tensor& qkv, Tensor& out, int64_t position);

  Scratch lse_, scratch_;
  std::vector<float> keys_, values_;  // decoding: [sample][position][C]
  std::vector<float> scores_;         // decoding: one query's scores
  int64_t cached_samples_ = 0, cached_positions_ = 0;
};

}  // namespace dtrain
