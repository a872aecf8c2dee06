#include "core/train/replica_set.h"

#include <cblas.h>

#include <algorithm>

#include "core/backend/device_memory.h"
#include "core/backend/ops.h"
#include "core/errors.h"
#include "core/nn/device_layers.h"
#include "core/util/process_memory.h"
#include "datasets/byte_images.h"
#include "datasets/micro_batch.h"
#include "models/model_builder.h"

namespace dtrain {

ReplicaSet::ReplicaSet(const ModelSection& model, const Shape& input_shape, int64_t classes,
                       const LayerRegistry& registry, int threads, int64_t max_batch, Device device,
                       const GpuLayerOptions& gpu)
    : pool_(threads), classes_(classes), device_(device) {
  if (!device.isCpu() && threads != 1)
    throw Error("a GPU replica set runs one replica; got " + std::to_string(threads) + " threads");
  // Each compute thread runs its own replica, so BLAS must not add threads of its own.
  openblas_set_num_threads(1);
  capacity_ = (max_batch + pool_.size() - 1) / pool_.size();
  replicas_.resize(static_cast<size_t>(pool_.size()));
  const LayerRegistry device_layers = device.isCpu() ? LayerRegistry() : layersFor(device, gpu);
  const LayerRegistry& layers = device.isCpu() ? registry : device_layers;
  for (auto& r : replicas_) r.model = buildModel(model, input_shape, classes, layers);
  // A per-position model's rows may be wider than the classes (a padded vocabulary).
  width_ = replicas_[0].model->outputShape()[replicas_[0].model->outputShape().rank() - 1];
  labels_per_sample_ = replicas_[0].model->outputShape().numel() / width_;
  replicas_[0].model->registerParams(store_);
  store_.allocate(device);
  replicas_[0].model->registerBuffers(buffers_);
  buffers_.allocate(device);
  buffers_.initialize(0);  // running statistics start at their fixed values (mean 0, variance 1)
  if (pool_.size() > 1) thread_stats_ = std::make_unique<BatchStatsReducer>(pool_.size(), nullptr);
  for (auto& r : replicas_) {
    r.grads = store_.gradBuffer();
    r.model->bind(store_, r.grads, capacity_, &buffers_);
    r.dlogits = Tensor::empty(Shape{capacity_ * labels_per_sample_, width_}, device);
  }
  if (!device.isCpu()) {
    device_input_ = Tensor::empty(input_shape.withBatch(capacity_), device);
    loss_ = DeviceLoss::make(device, classes, labels_per_sample_ > 1 ? width_ : 0);
    stager_ = BatchStager::make(device, device_input_.numel(), capacity_ * labels_per_sample_);
  }
}

namespace {

// A lone replica whose statistics are summed over the ranks only.
class RankStatsReducer : public StatsReducer {
 public:
  explicit RankStatsReducer(BatchStatsReducer::RankSum sum) : sum_(std::move(sum)) {}
  void allReduceSum(double* data, int64_t n) override { sum_(data, n); }

 private:
  BatchStatsReducer::RankSum sum_;
};

}  // namespace

void ReplicaSet::syncBatchStatsAcrossRanks(BatchStatsReducer::RankSum rank_sum) {
  if (pool_.size() > 1) {
    thread_stats_ = std::make_unique<BatchStatsReducer>(pool_.size(), std::move(rank_sum));
  } else {
    rank_stats_ = std::make_unique<RankStatsReducer>(std::move(rank_sum));
  }
}

namespace {

BatchFigures figuresOf(const LossSums& sums) {
  return BatchFigures{sums.loss_sum, sums.correct, sums.samples};
}

}  // namespace

BatchStager::Staged ReplicaSet::stageTrainingBatch(const Batch& batch) {
  if (!stager_) throw Error("stageTrainingBatch is for GPU replica sets");
  if (batch.size > capacity_)
    throw Error("a training batch of " + std::to_string(batch.size) + " exceeds the replica's " +
                std::to_string(capacity_) + " samples");
  PhaseSpan span(profile_, DevicePhase::Copy);
  if (batch.form != BatchForm::Floats)
    return stager_->stageBytes(batch.bytes.pixels, batch.bytes.transforms, batch.labels.data(), batch.size);
  const int64_t sample = device_input_.shape().withoutBatch().numel();
  return stager_->stage(batch.images.data(), batch.size * sample, batch.labels.data(),
                        batch.size * labels_per_sample_);
}

void ReplicaSet::useByteBatches(BatchForm form, const ByteImages& images,
                                const Normalisation& normalisation) {
  if (!stager_) throw Error("useByteBatches is for GPU replica sets");
  if (form == BatchForm::Floats) return;
  const Shape shape = images.sampleShape();
  if (shape != device_input_.shape().withoutBatch())
    throw Error("useByteBatches: samples of " + shape.str() + " for a model reading " +
                device_input_.shape().withoutBatch().str());
  BatchStager::ByteFormat f;
  f.channels = shape[0];
  f.height = shape[1];
  f.width = shape[2];
  f.mean = normalisation.mean();
  f.std = normalisation.std();
  if (form == BatchForm::Indices) {
    f.cache = images.pixels();
    f.cache_samples = images.size();
  }
  stager_->useBytes(f);
}

int64_t ReplicaSet::freeDeviceBytes() const {
  if (!stager_) throw Error("freeDeviceBytes is for GPU replica sets");
  return stager_->freeDeviceBytes();
}

void ReplicaSet::queueTrainingPass(const Batch& batch, const BatchStager::Staged& staged, uint64_t seed,
                                   float grad_scale, BackwardListener* listener,
                                   const StepScalars* step_scalars) {
  Replica& r = replicas_[0];
  const int64_t n = batch.size;
  if (n == 0) {  // nothing to compute: its gradients stay zero
    if (listener)
      for (int i = static_cast<int>(r.model->nodes().size()) - 1; i >= 0; --i) listener->layerDone(i);
    return;
  }
  const Tensor input =
      Tensor::view(staged.images, device_input_.shape().withoutBatch().withBatch(n), device_);
  LayerContext ctx;
  ctx.layer_timer = profile_;
  ctx.training = true;
  ctx.seed = seed;
  ctx.sample_offset = batch.global_offset;
  ctx.step_scalars = step_scalars;
  ctx.backward_listener = listener;
  ctx.stats_reducer = rank_stats_.get();
  const Tensor& logits = r.model->forward(input, ctx);
  const int64_t rows = n * labels_per_sample_;
  Tensor dlogits = r.dlogits.narrow(0, rows).reshape(logits.shape());
  {
    PhaseSpan span(profile_, DevicePhase::Loss);
    loss_->queueOnDevice(logits.data(), staged.labels, rows, lossScale(batch, grad_scale), dlogits.data(),
                         label_smoothing_);
  }
  r.model->backward(input, dlogits, ctx);
}

void ReplicaSet::doneWithTrainingBatch() {
  if (!stager_) throw Error("doneWithTrainingBatch is for GPU replica sets");
  stager_->doneWith();
}

DeviceLoss& ReplicaSet::deviceLoss() {
  if (!loss_) throw Error("deviceLoss is for GPU replica sets");
  return *loss_;
}

BatchFigures ReplicaSet::runOnDevice(const Batch& batch, bool training, uint64_t seed, float grad_scale,
                                     BackwardListener* listener) {
  if (training) {
    const BatchStager::Staged staged = stageTrainingBatch(batch);
    queueTrainingPass(batch, staged, seed, grad_scale, listener, nullptr);
    doneWithTrainingBatch();
    return BatchFigures{};  // queued: read with takeDeviceFigures()
  }
  // Evaluation walks larger batches in pieces, from the loader's pinned buffer.
  Replica& r = replicas_[0];
  for (int64_t start = 0; start < batch.size; start += capacity_) {
    const int64_t len = std::min(capacity_, batch.size - start);
    Tensor input = device_input_.narrow(0, len);
    input.copyFrom(batch.images.narrow(start, len));  // queued, so the host goes on at once
    LayerContext ctx;
    ctx.training = false;
    ctx.sample_offset = batch.global_offset + start;
    const Tensor& logits = r.model->forward(input, ctx);
    loss_->queue(logits.data(), batch.labels.data() + start * labels_per_sample_, len * labels_per_sample_,
                 0.0f, nullptr, 0.0f);
  }
  return figuresOf(loss_->read());  // evaluation waits for its figures
}

void ReplicaSet::snapshotDeviceFigures() {
  if (!loss_) throw Error("snapshotDeviceFigures is for GPU replica sets");
  loss_->snapshot();
}

BatchFigures ReplicaSet::takeDeviceFigures() {
  if (!loss_) throw Error("takeDeviceFigures is for GPU replica sets");
  return figuresOf(loss_->takeSnapshot());
}

void ReplicaSet::discardDeviceFigures() {
  if (!loss_) throw Error("discardDeviceFigures is for GPU replica sets");
  while (loss_->pendingSnapshots() > 0) loss_->takeSnapshot();
  loss_->snapshot();  // what was queued since: read, which waits for the device, and dropped
  loss_->takeSnapshot();
}

float ReplicaSet::lossScale(const Batch& batch, float grad_scale) const {
  return labels_per_sample_ == 1 ? grad_scale : perLabelScale(batch, grad_scale);
}

BatchFigures ReplicaSet::runSlices(const Batch& batch, bool training, uint64_t seed, float grad_scale,
                                   BackwardListener* listener) {
  if (!device_.isCpu()) return runOnDevice(batch, training, seed, grad_scale, listener);
  const int64_t n = batch.size;
  const int parts = pool_.size();
  // Batch statistics are reduced over the threads that have samples; the
  // first of them writes the running statistics.
  int first_taking_part = -1;
  std::vector<bool> taking_part(static_cast<size_t>(parts));
  for (int t = 0; t < parts; ++t) {
    auto [begin, end] = WorkerPool::split(n, parts, t);
    taking_part[static_cast<size_t>(t)] = end > begin;
    if (end > begin && first_taking_part < 0) first_taking_part = t;
  }
  BatchStatsReducer* stats = training ? thread_stats_.get() : nullptr;
  if (stats) stats->beginPass(taking_part);
  pool_.run([&](int t) {
    try {
      runSlice(batch, training, seed, grad_scale, listener, t, t == first_taking_part);
    } catch (...) {
      if (stats) stats->abort();  // the other threads may be waiting for this one's statistics
      throw;
    }
  });
  BatchFigures total;
  for (const Replica& r : replicas_) total += r.figures;
  return total;
}

void ReplicaSet::runSlice(const Batch& batch, bool training, uint64_t seed, float grad_scale,
                          BackwardListener* listener, int t, bool updates_buffers) {
  const int64_t n = batch.size;
  Replica& r = replicas_[static_cast<size_t>(t)];
  r.figures = BatchFigures{};
  auto [begin, end] = WorkerPool::split(n, pool_.size(), t);
  // Evaluation batches may exceed the capacity: walk them in pieces.
  for (int64_t start = begin; start < end; start += capacity_) {
    int64_t len = std::min(capacity_, end - start);
    Tensor input = batch.images.narrow(start, len);
    LayerContext ctx;
    ctx.training = training;
    ctx.seed = seed;
    ctx.sample_offset = batch.global_offset + start;  // dropout masks follow the global row
    ctx.stats_reducer = !training       ? nullptr
                        : thread_stats_ ? thread_stats_->forReplica(t)
                                        : rank_stats_.get();  // one thread: only the ranks to sum over
    ctx.updates_buffers = updates_buffers;
    // Gradients are final only after the replica's last piece.
    ctx.backward_listener = start + len == end ? listener : nullptr;
    StepProfile* profile = training && t == 0 ? profile_ : nullptr;  // replica 0 speaks for the others
    ctx.layer_timer = profile;
    ctx.parameter_gate = gate_;
    const Tensor& logits = r.model->forward(input, ctx);
    const int64_t rows = len * labels_per_sample_;
    Tensor dlogits = r.dlogits.narrow(0, rows).reshape(logits.shape());
    int64_t correct = 0, counted = rows;
    if (profile) profile->beginPhase(DevicePhase::Loss);
    if (labels_per_sample_ == 1) {
      r.figures.loss_sum +=
          ops::softmaxCrossEntropy(logits.data(), batch.labels.data() + start, len, classes_, grad_scale,
                                   dlogits.data(), &correct, training ? label_smoothing_ : 0.0f);
    } else {
      // A sequence model's positions are rows of the loss like samples, its
      // padding left out; the gradient is that of the mean over the global
      // batch's counted labels (grad_scale is the loss scaler's factor over
      // the global batch's samples).
      const float token_scale = lossScale(batch, grad_scale);
      counted = 0;
      r.figures.loss_sum += ops::tokenCrossEntropy(
          logits.data(), batch.labels.data() + start * labels_per_sample_, rows, width_, classes_,
          token_scale, dlogits.data(), &correct, &counted, training ? label_smoothing_ : 0.0f);
    }
    if (profile) profile->endPhase(DevicePhase::Loss);
    r.figures.correct += correct;
    r.figures.samples += counted;
    if (training) r.model->backward(input, dlogits, ctx);
  }
  if (training && begin == end) {  // nothing to compute: its gradients stay zero
    const int nodes = static_cast<int>(r.model->nodes().size());
    if (gate_) {  // the gathers every rank takes part in, forward then backward
      for (int i = 0; i < nodes; ++i) gate_->beforeNode(i, false), gate_->afterNode(i, false);
      for (int i = nodes - 1; i >= 0; --i) gate_->beforeNode(i, true), gate_->afterNode(i, true);
    }
    if (listener)
      for (int i = nodes - 1; i >= 0; --i) listener->layerDone(i);
  }
}

BatchFigures ReplicaSet::trainStep(const Batch& batch, uint64_t step_seed, float grad_scale,
                                   BackwardListener* listener) {
  if (micro_batches_ == 1) return runSlices(batch, true, step_seed, grad_scale, listener);
  // Every worker cuts its slice into the same number of micro-batches, so
  // collectives inside a pass (batch statistics summed over the ranks) meet
  // in step.
  BatchFigures total;
  for (int64_t m = 0; m < micro_batches_; ++m)
    total += runSlices(nthMicroBatch(batch, m, micro_batches_), true, step_seed, grad_scale,
                       m + 1 == micro_batches_ ? listener : nullptr);
  return total;
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

void ReplicaSet::releaseOtherReplicasGradients(int64_t begin, int64_t end) {
  for (size_t r = 1; r < replicas_.size(); ++r) releaseFloats(replicas_[r].grads.data(), begin, end);
}

void ReplicaSet::clearGradients() {
  for (Replica& r : replicas_) {
    if (r.grads.device().isCpu())
      std::fill(r.grads.data(), r.grads.data() + r.grads.numel(), 0.0f);
    else
      fillDeviceMemory(r.grads.data(), r.grads.numel(), 0.0f, r.grads.device());
  }
}

BatchFigures ReplicaSet::evaluate(const Batch& batch) { return runSlices(batch, false, 0, 0.0f, nullptr); }

}  // namespace dtrain
