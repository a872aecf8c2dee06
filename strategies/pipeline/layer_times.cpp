#include "strategies/pipeline/layer_times.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "core/nn/layer_timer.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"

namespace dtrain::pipeline {

namespace {

// Each layer's forward and backward wall time, per pass.
class LayerClock final : public LayerTimer {
 public:
  explicit LayerClock(size_t layers) : layers_(layers) {}
  void begin(int, bool) override { start_ = std::chrono::steady_clock::now(); }
  void end(int node, bool) override {
    if (!passes_.empty())
      passes_.back()[static_cast<size_t>(node)] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void startPass() { passes_.emplace_back(layers_, 0.0); }
  // Per layer, the median over the passes: a pass another process's burst
  // slowed does not move it.
  std::vector<double> medians() const {
    std::vector<double> out(layers_, 0.0);
    for (size_t i = 0; i < layers_; ++i) {
      std::vector<double> v;
      for (const auto& pass : passes_) v.push_back(pass[i]);
      std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
      out[i] = v.empty() ? 0.0 : v[v.size() / 2];
    }
    return out;
  }

 private:
  size_t layers_;
  std::vector<std::vector<double>> passes_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::vector<double> measureLayerSeconds(const std::vector<LayerSpec>& specs, const Shape& input,
                                        const LayerRegistry& registry, const LayerDefaults& defaults,
                                        int64_t rows, int passes) {
  Model model(specs, input, registry, defaults);
  ParamStore store, buffers;
  model.registerParams(store);
  store.allocate();
  store.initialize(1);
  model.registerBuffers(buffers);
  buffers.allocate();
  buffers.initialize(0);
  Tensor grads = store.gradBuffer();
  model.bind(store, grads, rows, buffers.size() > 0 ? &buffers : nullptr);
  Tensor images = Tensor::empty(input.withBatch(rows));
  Tensor doutput = Tensor::empty(model.outputShape().withBatch(rows));
  std::mt19937 engine(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < images.numel(); ++i) images.data()[i] = normal(engine);
  for (int64_t i = 0; i < doutput.numel(); ++i) doutput.data()[i] = 0.01f * normal(engine);
  LayerClock clock(model.nodes().size());
  LayerContext ctx;
  ctx.layer_timer = &clock;
  ctx.updates_buffers = true;
  // The first pass sizes scratch memory and warms the caches: not counted.
  for (int p = 0; p <= passes; ++p) {
    if (p > 0) clock.startPass();
    ctx.seed = static_cast<uint64_t>(p);
    model.forward(images, ctx);
    model.backward(images, doutput, ctx);
  }
  return clock.medians();
}

}  // namespace dtrain::pipeline
