// position_embedding: adds a learned vector per position to a sequence,
// y[t] = x[t] + table[t] for x [T, dim], table [context, dim] (GPT-2's wpe).
// Options: context (> 0), init_std (default 0.02). A sequence longer than the
// context is a shape error when the model is built, never a silent
// truncation; a shorter one uses the table's first T rows.
//
// Ownership and threading: as every Layer.
#pragma once
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

struct PositionEmbeddingConfig {
  int64_t context = 0;
  double init_std = 0.02;
};

class PositionEmbedding : public Layer {
 public:
  PositionEmbedding(std::string name, PositionEmbeddingConfig config)
      : Layer(std::move(name)), config_(config) {}
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "position_embedding"; }
  Shape setup(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> paramSpecs() const override;
  void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  bool splitsBackward() const override { return true; }
  int64_t forwardFlops() const override { return tokens_ * dim_; }
  const PositionEmbeddingConfig& config() const { return config_; }
  std::string describe() const override;

 protected:
  PositionEmbeddingConfig config_;
  int64_t tokens_ = 0, dim_ = 0;
  Tensor table_, dtable_;
};

}  // namespace dtrain
