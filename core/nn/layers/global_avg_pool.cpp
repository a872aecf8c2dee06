#include "core/nn/layers/global_avg_pool.h"

#include "core/errors.h"
#include "core/nn/layers/layer_util.h"

namespace dtrain {

std::unique_ptr<Layer> GlobalAvgPool::create(const std::string& name, const LayerOptions& options,
                                             const LayerDefaults& defaults) {
  options.finish();
  return std::make_unique<GlobalAvgPool>(name);
}

Shape GlobalAvgPool::setup(const std::vector<Shape>& inputs) {
  const Shape& s = layer_util::singleInput(*this, inputs);
  if (s.rank() != 3)
    throw ShapeError(layer_util::label(*this) + " expects an input [channels,height,width], got " + s.str());
  channels_ = s[0];
  height_ = s[1];
  width_ = s[2];
  plane_ = height_ * width_;
  return Shape{channels_};
}

void GlobalAvgPool::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const float* x = in[0]->data();
  float* y = out.data();
  const int64_t planes = in[0]->dim(0) * channels_;
  const float scale = 1.0f / static_cast<float>(plane_);
  for (int64_t p = 0; p < planes; ++p) {
    const float* v = x + p * plane_;
    float sum = 0.0f;
    for (int64_t i = 0; i < plane_; ++i) sum += v[i];
    y[p] = sum * scale;
  }
}

void GlobalAvgPool::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                             const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (!din[0]) return;
  const float* dy = dout.data();
  float* dx = din[0]->data();
  const int64_t planes = dout.dim(0) * channels_;
  const float scale = 1.0f / static_cast<float>(plane_);
  for (int64_t p = 0; p < planes; ++p) {
    const float g = dy[p] * scale;
    float* v = dx + p * plane_;
    for (int64_t i = 0; i < plane_; ++i) v[i] = g;
  }
}

}  // namespace dtrain
