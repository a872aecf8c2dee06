#include "core/train/replica_set.h"

#include <cblas.h>

#include <algorithm>

#include "core/backend/device_layers.h"
#include "core/backend/ops.h"
#include "core/errors.h"
#include "models/model_builder.h"

namespace dtrain {

ReplicaSet::ReplicaSet(const ModelSection& model, const Shape& input_shape, int64_t classes,
                       const LayerRegistry& registry, int threads, int64_t max_batch, Device device)
    : pool_(threads), classes_(classes), device_(device) {
  if (!device.isCpu() && threads != 1)
    throw Error("a GPU replica set runs one replica; got " + std::to_string(threads) + " threads");
  // Each compute thread runs its own replica, so BLAS must not add threads of its own.
  openblas_set_num_threads(1);
  capacity_ = (max_batch + pool_.size() - 1) / pool_.size();
  replicas_.resize(static_cast<size_t>(pool_.size()));
  const LayerRegistry device_layers = device.isCpu() ? LayerRegistry() : layersFor(device);
  const LayerRegistry& layers = device.isCpu() ? registry : device_layers;
  for (auto& r : replicas_) r.model = buildModel(model, input_shape, classes, layers);
  replicas_[0].model->registerParams(store_);
  store_.allocate(device);
  for (auto& r : replicas_) {
    r.grads = store_.gradBuffer();
    r.model->bind(store_, r.grads, capacity_);
    r.dlogits = Tensor::empty(Shape{capacity_, classes}, device);
  }
  if (!device.isCpu()) {
    device_input_ = Tensor::empty(input_shape.withBatch(capacity_), device);
    loss_ = DeviceLoss::make(device, classes);
  }
}

BatchFigures ReplicaSet::runOnDevice(const Batch& batch, bool training, uint64_t seed, float grad_scale,
                                     BackwardListener* listener) {
  Replica& r = replicas_[0];
  const int64_t n = batch.size;
  for (int64_t start = 0; start < n; start += capacity_) {
    const int64_t len = std::min(capacity_, n - start);
    // From the loader's pinned buffer: queued, so the host goes on at once.
    Tensor input = device_input_.narrow(0, len);
    input.copyFrom(batch.images.narrow(start, len));
    LayerContext ctx;
    ctx.training = training;
    ctx.seed = seed;
    ctx.sample_offset = batch.global_offset + start;
    ctx.backward_listener = start + len == n ? listener : nullptr;
    const Tensor& logits = r.model->forward(input, ctx);
    Tensor dlogits = r.dlogits.narrow(0, len);
    loss_->queue(logits.data(), batch.labels.data() + start, len, grad_scale,
                 training ? dlogits.data() : nullptr);
    if (training) r.model->backward(input, dlogits, ctx);
  }
  if (training && listener && n == 0)  // nothing to compute: its gradients stay zero
    for (int i = static_cast<int>(r.model->nodes().size()) - 1; i >= 0; --i) listener->layerDone(i);
  if (training) return BatchFigures{};
  return takeDeviceFigures();
}

BatchFigures ReplicaSet::takeDeviceFigures() {
  if (!loss_) throw Error("takeDeviceFigures is for GPU replica sets");
  const LossSums sums = loss_->read();
  BatchFigures f;
  f.loss_sum = sums.loss_sum;
  f.correct = sums.correct;
  f.samples = sums.samples;
  return f;
}

BatchFigures ReplicaSet::runSlices(const Batch& batch, bool training, uint64_t seed, float grad_scale,
                                   BackwardListener* listener) {
  if (!device_.isCpu()) return runOnDevice(batch, training, seed, grad_scale, listener);
  const int64_t n = batch.size;
  const int parts = pool_.size();
  pool_.run([&](int t) {
    Replica& r = replicas_[static_cast<size_t>(t)];
    r.figures = BatchFigures{};
    auto [begin, end] = WorkerPool::split(n, parts, t);
    // Evaluation batches may exceed the capacity: walk them in pieces.
    for (int64_t start = begin; start < end; start += capacity_) {
      int64_t len = std::min(capacity_, end - start);
      Tensor input = batch.images.narrow(start, len);
      LayerContext ctx;
      ctx.training = training;
      ctx.seed = seed;
      ctx.sample_offset = batch.global_offset + start;  // dropout masks follow the global row
      // Gradients are final only after the replica's last piece.
      ctx.backward_listener = start + len == end ? listener : nullptr;
      const Tensor& logits = r.model->forward(input, ctx);
      Tensor dlogits = r.dlogits.narrow(0, len);
      int64_t correct = 0;
      r.figures.loss_sum += ops::softmaxCrossEntropy(logits.data(), batch.labels.data() + start, len,
                                                     classes_, grad_scale, dlogits.data(), &correct);
      r.figures.correct += correct;
      r.figures.samples += len;
      if (training) r.model->backward(input, dlogits, ctx);
    }
    if (training && listener && begin == end) {  // nothing to compute: its gradients stay zero
      for (int i = static_cast<int>(r.model->nodes().size()) - 1; i >= 0; --i) listener->layerDone(i);
    }
  });
  BatchFigures total;
  for (const Replica& r : replicas_) total += r.figures;
  return total;
}

BatchFigures ReplicaSet::trainStep(const Batch& batch, uint64_t step_seed, float grad_scale,
                                   BackwardListener* listener) {
  return runSlices(batch, true, step_seed, grad_scale, listener);
}

void ReplicaSet::sumGradients(int64_t begin, int64_t end) {
  float* dst = replicas_[0].grads.data();
  for (size_t r = 1; r < replicas_.size(); ++r) {
    float* src = replicas_[r].grads.data();
    for (int64_t i = begin; i < end; ++i) {
      dst[i] += src[i];
      src[i] = 0.0f;
    }
  }
}

BatchFigures ReplicaSet::evaluate(const Batch& batch) { return runSlices(batch, false, 0, 0.0f, nullptr); }

}  // namespace dtrain
