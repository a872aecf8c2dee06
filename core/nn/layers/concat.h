// concat: two or more inputs joined along one axis of the per-sample shape
// (Inception/DenseNet branches, U-Net skips). Option: axis (default 0, the
// channels of [C,H,W]; negative counts from the end: -1 is the last). Every
// other extent must be the same in all inputs. Backward cuts the output's
// gradient back into the inputs' parts.
//
// In memory each sample is `outer` rows (the extents before the axis) of the
// inputs' parts side by side; part i of a row is input i's extent along the
// axis times the extents after it.
//
// Ownership and threading: as every Layer; stateless.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/nn/layer.h"
#include "core/nn/layer_registry.h"

namespace dtrain {

class Concat : public Layer {
 public:
  Concat(std::string name, int64_t axis) : Layer(std::move(name)), axis_(axis) {}
  static std::unique_ptr<Layer> create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults);

  std::string type() const override { return "concat"; }
  int numInputs() const override { return kAnyInputs; }
  Shape setup(const std::vector<Shape>& inputs) override;
  void forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) override;
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<Tensor*>& din, const LayerContext& ctx) override;
  std::string describe() const override { return "axis " + std::to_string(axis_); }
  // As configured (possibly negative).
  int64_t axis() const { return axis_; }

 protected:  // the CUDA layer (core/nn/cuda/cuda_concat.h) computes with these
  int64_t axis_;
  int64_t outer_ = 0;             // rows per sample: the product of the extents before the axis
  int64_t row_ = 0;               // floats per output row: the sum of parts_
  std::vector<int64_t> parts_;    // floats of input i per row
  std::vector<int64_t> offsets_;  // where input i's part starts in an output row
};

}  // namespace dtrain
