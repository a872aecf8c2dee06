#include "core/nn/layers/concat.h"

#include <cstring>

#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

std::unique_ptr<Layer> Concat::create(const std::string& name, const LayerOptions& options,
                                      const LayerDefaults& defaults) {
  const int64_t axis = options.getInt("axis", 0);
  options.finish();
  return std::make_unique<Concat>(name, axis);
}

Shape Concat::setup(const std::vector<Shape>& inputs) {
  if (inputs.size() < 2)
    throw ShapeError(layer_util::label(*this) + " takes two or more inputs, got " +
                     std::to_string(inputs.size()));
  const Shape& first = inputs[0];
  const int64_t rank = static_cast<int64_t>(first.rank());
  if (axis_ < -rank || axis_ >= rank)
    throw ShapeError(layer_util::label(*this) + ": axis " + std::to_string(axis_) +
                     " is out of range for inputs of rank " + std::to_string(rank) + " like " + first.str() +
                     (rank > 0
                          ? "; use an axis from " + std::to_string(-rank) + " to " + std::to_string(rank - 1)
                          : std::string()));
  const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
  std::vector<int64_t> dims = first.dims();
  dims[axis] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool fits = inputs[i].rank() == first.rank();
    for (size_t d = 0; fits && d < first.rank(); ++d) fits = d == axis || inputs[i][d] == first[d];
    if (!fits)
      throw ShapeError(layer_util::label(*this) + " joins its inputs along axis " + std::to_string(axis) +
                       ", so every other extent must match, but input 0 is " + first.str() + " and input " +
                       std::to_string(i) + " is " + inputs[i].str());
    dims[axis] += inputs[i][axis];
  }
  outer_ = 1;
  for (size_t d = 0; d < axis; ++d) outer_ *= first[d];
  int64_t inner = 1;
  for (size_t d = axis + 1; d < first.rank(); ++d) inner *= first[d];
  parts_.clear();
  offsets_.clear();
  row_ = 0;
  for (const Shape& s : inputs) {
    offsets_.push_back(row_);
    parts_.push_back(s[axis] * inner);
    row_ += parts_.back();
  }
  return Shape(std::move(dims));
}

void Concat::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t rows = out.dim(0) * outer_;
  float* y = out.data();
  for (size_t i = 0; i < in.size(); ++i) {
    const float* x = in[i]->data();
    const size_t bytes = static_cast<size_t>(parts_[i]) * sizeof(float);
    if (bytes == 0) continue;  // an empty part: nothing to copy (and maybe no memory)
    for (int64_t r = 0; r < rows; ++r) std::memcpy(y + r * row_ + offsets_[i], x + r * parts_[i], bytes);
  }
}

void Concat::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                      const std::vector<Tensor*>& din, const LayerContext& ctx) {
  const int64_t rows = dout.dim(0) * outer_;
  const float* dy = dout.data();
  for (size_t i = 0; i < din.size(); ++i) {
    const size_t bytes = static_cast<size_t>(parts_[i]) * sizeof(float);
    if (!din[i] || bytes == 0) continue;
    float* dx = din[i]->data();
    for (int64_t r = 0; r < rows; ++r) std::memcpy(dx + r * parts_[i], dy + r * row_ + offsets_[i], bytes);
  }
}

}  // namespace dtrain
