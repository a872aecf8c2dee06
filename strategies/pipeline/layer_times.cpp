#include "strategies/pipeline/layer_times.h"

#include <algorithm>
#include <memory>
#include <random>

#include "core/backend/span_clock.h"
#include "core/nn/layer_timer.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"

namespace dtrain::pipeline {

namespace {

// Each layer's forward and backward, one span slot per layer, on the
// device's clock (the wall clock on the CPU, events on a GPU's stream).
class LayerSpans final : public LayerTimer {
 public:
  explicit LayerSpans(Device device) : clock_(SpanClock::make(device)) {}
  void begin(int node, bool) override { clock_->begin(node); }
  void end(int node, bool) override { clock_->end(node); }
  // The pass's seconds per layer (waits for the device).
  std::vector<double> read(size_t layers) {
    std::vector<double> out = clock_->read();
    out.resize(layers, 0.0);
    return out;
  }

 private:
  std::unique_ptr<SpanClock> clock_;
};

// Per layer, the median over the passes: a pass another process's burst
// slowed does not move it.
std::vector<double> medians(const std::vector<std::vector<double>>& passes, size_t layers) {
  std::vector<double> out(layers, 0.0);
  for (size_t i = 0; i < layers; ++i) {
    std::vector<double> v;
    for (const auto& pass : passes) v.push_back(pass[i]);
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    out[i] = v.empty() ? 0.0 : v[v.size() / 2];
  }
  return out;
}

}  // namespace

std::vector<double> measureLayerSeconds(const std::vector<LayerSpec>& specs, const Shape& input,
                                        const LayerRegistry& registry, const LayerDefaults& defaults,
                                        int64_t rows, int passes, Device device, int64_t token_vocab) {
  Model model(specs, input, registry, defaults);
  ParamStore store, buffers;
  model.registerParams(store);
  store.allocate(device);
  store.initialize(1);
  model.registerBuffers(buffers);
  buffers.allocate(device);
  buffers.initialize(0);
  Tensor grads = store.gradBuffer();
  model.bind(store, grads, rows, buffers.size() > 0 ? &buffers : nullptr);
  Tensor images = Tensor::empty(input.withBatch(rows));
  Tensor doutput = Tensor::empty(model.outputShape().withBatch(rows));
  std::mt19937 engine(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int64_t> id(0, std::max<int64_t>(token_vocab, 1) - 1);
  for (int64_t i = 0; i < images.numel(); ++i)
    images.data()[i] = token_vocab > 0 ? static_cast<float>(id(engine)) : normal(engine);
  for (int64_t i = 0; i < doutput.numel(); ++i) doutput.data()[i] = 0.01f * normal(engine);
  images = images.to(device);
  doutput = doutput.to(device);
  const size_t layers = model.nodes().size();
  LayerSpans clock(device);
  LayerContext ctx;
  ctx.layer_timer = &clock;
  ctx.updates_buffers = true;
  std::vector<std::vector<double>> times;
  // The first pass sizes scratch memory, warms the caches and (on a GPU)
  // picks the convolutions' algorithms: not counted.
  for (int p = 0; p <= passes; ++p) {
    ctx.seed = static_cast<uint64_t>(p);
    model.forward(images, ctx);
    model.backward(images, doutput, ctx);
    std::vector<double> pass = clock.read(layers);
    if (p > 0) times.push_back(std::move(pass));
  }
  return medians(times, layers);
}

}  // namespace dtrain::pipeline
