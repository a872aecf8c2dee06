// embedding: token ids to vectors. Input [T] (ids held as whole floats: a
// model's input is floats, exact for ids below 2^24), output [T, dim] = the
// rows of the table [vocab, dim] the ids name. Options: vocab (> 0), dim
// (> 0), init_std (default 0.02: GPT-2's normal initialisation). An id
// outside [0, vocab) is an error naming the layer, the token and the id, not
// a read out of bounds. No input gradient: ids are not differentiable, so an
// embedding reads the network's input.
//
// Ownership and threading: as every Layer; the table is shared read-only, its
// gradient rows are the replica's own.
#pragma once
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

struct EmbeddingConfig {
  int64_t vocab = 0, dim = 0;
  double init_std = 0.02;
};

class Embedding : public Layer {
 public:
  Embedding(std::string name, EmbeddingConfig config);
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "embedding"; }
  SixteenBitRole sixteenBitRole() const override { return SixteenBitRole::Product; }
  bool readsTokenIds() const override { return true; }
  Shape setup(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> paramSpecs() const override;
  void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  std::string describe() const override;
  const EmbeddingConfig& config() const { return config_; }

 protected:
  EmbeddingConfig config_;
  int64_t tokens_ = 0;  // per sample
  Tensor table_, dtable_;
};

}  // namespace dtrain
