// dropout: inverted dropout while training (kept elements scaled by
// 1/(1-rate)), the identity at inference. Option: rate in [0, 1) (default 0.5).
// The mask is a pure function of (ctx.seed, ctx.layer_index, global sample
// index = ctx.sample_offset + row, element index) -- see ops::dropoutForward --
// so it does not depend on how the batch is split across threads or ranks,
// and backward recomputes it instead of storing it.
//
// Ownership and threading: as every Layer; stateless.
#pragma once
#include "core/backend/ops.h"
#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

class Dropout : public Layer {
 public:
  Dropout(std::string name, double rate);
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "dropout"; }
  Shape setup(const std::vector<Shape>& inputs) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  int64_t forwardFlops() const override { return elements_; }
  std::string describe() const override;
  float rate() const { return rate_; }

 protected:
  // The masked pass over `rows` samples of elements_ values (training, rate >
  // 0); forward/backward handle the identity cases and the key. The CUDA layer
  // (core/nn/cuda/cuda_dropout.h) overrides forward and backward, building the
  // same key for kernels of any dtype.
  void maskForward(const float* x, float* y, int64_t rows, const ops::DropoutKey& key);
  void maskBackward(const float* dy, float* dx, int64_t rows, const ops::DropoutKey& key);

  float rate_;
  int64_t elements_ = 0;
};

}  // namespace dtrain
