#include "core/train/replica_set.h"

#include <cblas.h>

#include <algorithm>

#include "core/nn/device_layers.h"
#include "core/backend/ops.h"
#include "core/errors.h"
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
  replicas_[0].model->registerParams(store_);
  store_.allocate(device);
  replicas_[0].model->registerBuffers(buffers_);
  buffers_.allocate(device);
  buffers_.initialize(0);  // running statistics start at their fixed values (mean 0, variance 1)
  if (pool_.size() > 1) thread_stats_ = std::make_unique<BatchStatsReducer>(pool_.size(), nullptr);
  for (auto& r : replicas_) {
    r.grads = store_.gradBuffer();
    r.model->bind(store_, r.grads, capacity_, &buffers_);
    r.dlogits = Tensor::empty(Shape{capacity_, classes}, device);
  }
  if (!device.isCpu()) {
    device_input_ = Tensor::empty(input_shape.withBatch(capacity_), device);
    loss_ = DeviceLoss::make(device, classes);
    stager_ = BatchStager::make(device, device_input_.numel(), capacity_);
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

BatchFigures figuresOf(const LossSums& sums) { return BatchFigures{sums.loss_sum, sums.correct, sums.samples}; }

}  // namespace

BatchFigures ReplicaSet::runOnDevice(const Batch& batch, bool training, uint64_t seed, float grad_scale,
                                     BackwardListener* listener) {
  Replica& r = replicas_[0];
  const int64_t n = batch.size;
  // Training batches fit the replica (capacity = the training batch) and go
  // through the stager's copy stream; evaluation walks larger batches in pieces.
  for (int64_t start = 0; start < n; start += capacity_) {
    const int64_t len = std::min(capacity_, n - start);
    StepProfile* profile = training ? profile_ : nullptr;
    if (profile) profile->beginPhase(DevicePhase::Copy);
    Tensor input;
    const int32_t* device_labels = nullptr;
    if (training) {
      const Shape sample = device_input_.shape().withoutBatch();
      const BatchStager::Staged staged = stager_->stage(batch.images.data() + start * sample.numel(),
                                                        len * sample.numel(), batch.labels.data() + start, len);
      input = Tensor::view(staged.images, sample.withBatch(len), device_);
      device_labels = staged.labels;
    } else {
      // From the loader's pinned buffer: queued, so the host goes on at once.
      input = device_input_.narrow(0, len);
      input.copyFrom(batch.images.narrow(start, len));
    }
    if (profile) profile->endPhase(DevicePhase::Copy);
    LayerContext ctx;
    ctx.layer_timer = profile;
    ctx.training = training;
    ctx.seed = seed;
    ctx.sample_offset = batch.global_offset + start;
    ctx.backward_listener = start + len == n ? listener : nullptr;
    ctx.stats_reducer = training ? rank_stats_.get() : nullptr;
    const Tensor& logits = r.model->forward(input, ctx);
    Tensor dlogits = r.dlogits.narrow(0, len);
    if (profile) profile->beginPhase(DevicePhase::Loss);
    if (training)
      loss_->queueOnDevice(logits.data(), device_labels, len, grad_scale, dlogits.data(), label_smoothing_);
    else
      loss_->queue(logits.data(), batch.labels.data() + start, len, grad_scale, nullptr, 0.0f);
    if (profile) profile->endPhase(DevicePhase::Loss);
    if (training) {
      r.model->backward(input, dlogits, ctx);
      stager_->doneWith();
    }
  }
  if (training && listener && n == 0)  // nothing to compute: its gradients stay zero
    for (int i = static_cast<int>(r.model->nodes().size()) - 1; i >= 0; --i) listener->layerDone(i);
  if (training) return BatchFigures{};
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
    const Tensor& logits = r.model->forward(input, ctx);
    Tensor dlogits = r.dlogits.narrow(0, len);
    int64_t correct = 0;
    if (profile) profile->beginPhase(DevicePhase::Loss);
    r.figures.loss_sum +=
        ops::softmaxCrossEntropy(logits.data(), batch.labels.data() + start, len, classes_, grad_scale,
                                 dlogits.data(), &correct, training ? label_smoothing_ : 0.0f);
    if (profile) profile->endPhase(DevicePhase::Loss);
    r.figures.correct += correct;
    r.figures.samples += len;
    if (training) r.model->backward(input, dlogits, ctx);
  }
  if (training && listener && begin == end) {  // nothing to compute: its gradients stay zero
    for (int i = static_cast<int>(r.model->nodes().size()) - 1; i >= 0; --i) listener->layerDone(i);
  }
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
