#include "core/nn/layers/avg_pool.h"

namespace dtrain {

AvgPool::AvgPool(std::string name, PoolConfig config) : Layer(std::move(name)), config_(config) {
  checkPoolConfig(*this, config_);
}

std::unique_ptr<Layer> AvgPool::create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults) {
  PoolConfig c = readPoolConfig(options);
  options.finish();
  return std::make_unique<AvgPool>(name, c);
}

Shape AvgPool::setup(const std::vector<Shape>& inputs) {
  geom_ = poolGeometry(*this, config_, inputs);
  return Shape{geom_.channels, geom_.outHeight(), geom_.outWidth()};
}

void AvgPool::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  ops::avgPoolForward(in[0]->data(), in[0]->dim(0), geom_, out.data());
}

void AvgPool::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                       const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (din[0]) ops::avgPoolBackward(dout.data(), in[0]->dim(0), geom_, din[0]->data());
}

int64_t AvgPool::forwardFlops() const {
  // One addition per window element (the final scale is folded in).
  return geom_.channels * geom_.outPlane() * config_.kernel_h * config_.kernel_w;
}

}  // namespace dtrain
