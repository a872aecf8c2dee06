#include "core/nn/layers/max_pool.h"

namespace dtrain {

MaxPool::MaxPool(std::string name, PoolConfig config) : Layer(std::move(name)), config_(config) {
  checkPoolConfig(*this, config_);
}

std::unique_ptr<Layer> MaxPool::create(const std::string& name, const LayerOptions& options,
                                       const LayerDefaults& defaults) {
  PoolConfig c = readPoolConfig(options);
  options.finish();
  return std::make_unique<MaxPool>(name, c);
}

Shape MaxPool::setup(const std::vector<Shape>& inputs) {
  geom_ = poolGeometry(*this, config_, inputs);
  return Shape{geom_.channels, geom_.outHeight(), geom_.outWidth()};
}

void MaxPool::forward(const std::vector<const Tensor*>& in, Tensor& out, const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0);
  // Inference needs no indices: no backward follows it (and eval batches can be
  // much larger than training slices, so this also keeps the buffer small).
  int32_t* argmax = ctx.training ? argmax_.ints(n * geom_.channels * geom_.outPlane()) : nullptr;
  ops::maxPoolForward(in[0]->data(), n, geom_, out.data(), argmax);
}

void MaxPool::backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                       const std::vector<Tensor*>& din, const LayerContext& ctx) {
  if (!din[0]) return;
  const int64_t n = in[0]->dim(0);
  ops::maxPoolBackward(dout.data(), argmax_.ints(n * geom_.channels * geom_.outPlane()), n, geom_,
                       din[0]->data());
}

int64_t MaxPool::forwardFlops() const {
  // One comparison per window element.
  return geom_.channels * geom_.outPlane() * config_.kernel_h * config_.kernel_w;
}

}  // namespace dtrain
