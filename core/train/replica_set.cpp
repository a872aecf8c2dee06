#include "core/train/replica_set.h"

#include <cblas.h>

#include <algorithm>

#include "core/backend/ops.h"
#include "models/model_builder.h"

namespace dtrain {

ReplicaSet::ReplicaSet(const ModelSection& model, const Shape& input_shape, int64_t classes,
                       const LayerRegistry& registry, int threads, int64_t max_batch)
    : pool_(threads), classes_(classes) {
  // Each compute thread runs its own replica, so BLAS must not add threads of its own.
  openblas_set_num_threads(1);
  capacity_ = (max_batch + pool_.size() - 1) / pool_.size();
  replicas_.resize(static_cast<size_t>(pool_.size()));
  for (auto& r : replicas_) r.model = buildModel(model, input_shape, classes, registry);
  replicas_[0].model->registerParams(store_);
  store_.allocate();
  for (auto& r : replicas_) {
    r.grads = store_.gradBuffer();
    r.model->bind(store_, r.grads, capacity_);
    r.dlogits = Tensor::empty(Shape{capacity_, classes});
  }
}

BatchFigures ReplicaSet::runSlices(const Batch& batch, bool training, uint64_t seed, float grad_scale,
                                   BackwardListener* listener) {
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
