// Data parallelism inside one process: the batch is split across compute
// threads, each running its own model replica (layers, activations, gradient
// buffer) over the shared parameters. After backward the replicas' gradients
// are summed in a fixed order, so results are bitwise reproducible for a given
// thread count. Every op then runs single-threaded (BLAS included), which keeps
// both cores busy through the memory-bound ops too, not only matrix products.
//
// On a GPU there is one replica (one process drives one device): its layers
// are the device's (core/nn/device_layers.h), parameters, gradients and
// activations live in device memory, each training batch is copied there
// from the loader's pinned buffers on a copy stream (BatchStager) while the
// previous step computes (as floats, or as bytes made floats on the device,
// useByteBatches), and the loss sums are snapshotted after the update
// and read a step later, so the host never waits for the device.
//
// Ownership: owns the worker pool, the replicas and the parameter store.
// Not thread-safe: one caller (the trainer loop).
#pragma once
#include <memory>
#include <vector>

#include "core/backend/batch_stager.h"
#include "core/backend/device_loss.h"
#include "core/backend/half_copy.h"
#include "core/config/job_config.h"
#include "core/nn/gpu_layer_options.h"
#include "core/nn/layer_registry.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"
#include "core/nn/parameter_gate.h"
#include "core/train/batch_stats_reducer.h"
#include "core/train/step_profile.h"
#include "core/util/worker_pool.h"
#include "datasets/batch_loader.h"

namespace dtrain {

// Sums over the samples of one batch.
struct BatchFigures {
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t samples = 0;
  BatchFigures& operator+=(const BatchFigures& o) {
    loss_sum += o.loss_sum;
    correct += o.correct;
    samples += o.samples;
    return *this;
  }
};

class ReplicaSet {
 public:
  // `max_batch` is the largest training batch; evaluation batches are processed
  // in pieces of that size. On a GPU `device`, `registry` is replaced by the
  // device's layers (choosing their algorithms as `gpu` says; its cache must
  // outlive the set) and `threads` must be 1.
  ReplicaSet(const ModelSection& model, const Shape& input_shape, int64_t classes,
             const LayerRegistry& registry, int threads, int64_t max_batch, Device device = Device::cpu(),
             const GpuLayerOptions& gpu = {});

  Device device() const { return device_; }

  int threads() const { return pool_.size(); }
  WorkerPool& pool() { return pool_; }
  ParamStore& store() { return store_; }
  // Untrained state (batch norm's running statistics), shared by the replicas
  // like the parameters and saved with them; empty when no layer has any.
  ParamStore& buffers() { return buffers_; }
  const Model& model() const { return *replicas_[0].model; }

  // Batch statistics summed over the ranks too ([strategy] sync_batchnorm):
  // `rank_sum` adds the other ranks' vectors (on the GPU, in device memory).
  // It is called from a compute thread in the middle of forward and backward,
  // so nothing else may use the ranks' collectives during a training pass.
  void syncBatchStatsAcrossRanks(BatchStatsReducer::RankSum rank_sum);
  // [train] accumulate: each training batch passes in `micro_batches`
  // micro-batches, their gradients adding up in the buffers (1: whole).
  void setMicroBatches(int64_t micro_batches) { micro_batches_ = micro_batches; }
  // Label smoothing of the training loss (evaluation reports the plain loss).
  void setLabelSmoothing(float smoothing) { label_smoothing_ = smoothing; }
  // The arithmetic of every replica's passes ([job] precision; Model::setPrecision).
  void setPrecision(Precision precision) {
    for (Replica& r : replicas_) r.model->setPrecision(precision);
  }
  // A GPU in a 16-bit precision: the model's 16-bit parameter copy, for an
  // update to write as it computes the masters (none otherwise); after such
  // an update, halfCopyWritten() spares the next forward its cast.
  HalfCopy updatedHalfCopy() {
    Tensor& half = replicas_[0].model->halfParams();
    return half.defined() && half.numel() > 0 ? HalfCopy{half.raw(), half.dtype()} : HalfCopy{};
  }
  void halfCopyWritten() { replicas_[0].model->paramsCastByUpdate(); }
  // The parameters were overwritten other than by an update (a broadcast
  // from the chief): the next forward casts them again.
  void paramsChangedElsewhere() {
    for (Replica& r : replicas_) r.model->paramsChangedElsewhere();
  }
  // Passes gather the parameters each node reads through `gate` (a sharded
  // run's stage 3; one replica); null: all are in memory. A replica with no
  // samples in a training pass still goes through the gate node by node, so
  // that every rank takes part in the same gathers.
  void setParameterGate(ParameterGate* gate) { gate_ = gate; }
  // Times replica 0's layers, the batch's copy and the loss in training
  // passes (dtrain bench step); null: nothing is timed.
  void setProfile(StepProfile* profile) { profile_ = profile; }

  // Forward and backward over the batch: each replica adds the gradient of its
  // samples' loss (scaled by grad_scale, usually 1/batch) to its own buffer.
  // The buffers must be zero before (they start so; see sumGradients).
  // `listener` (optional) hears every replica finish each layer's backward,
  // also replicas whose slice of the batch is empty; with micro-batches
  // (setMicroBatches), in the last one's backward, when the gradients are whole.
  // On a GPU the work is queued and the figures returned are zero: read them
  // with takeDeviceFigures() once the update is queued too.
  BatchFigures trainStep(const Batch& batch, uint64_t step_seed, float grad_scale,
                         BackwardListener* listener = nullptr);
  // GPU only: queues the copy of the figures of the training steps since the
  // last snapshot (never waits); takeDeviceFigures returns the oldest
  // snapshot's, waiting only when the device has not got there yet. The
  // trainer takes a step's figures one step later.
  void snapshotDeviceFigures();
  BatchFigures takeDeviceFigures();
  // GPU only: waits for the device to finish what was queued, and drops the
  // figures of the steps not yet taken (an elastic step that failed part way
  // is redone, and its figures with it).
  void discardDeviceFigures();
  // GPU only: trainStep in its three parts, for a step recorded once as a
  // CUDA graph and replayed (core/train/device_step.h): queue the batch's copy
  // into one of the stager's two buffers; queue forward, loss and backward on
  // them (the batch must fit the replica; step_scalars, device memory, null
  // = seed and the batch's offset by value); then let the stager refill them.
  BatchStager::Staged stageTrainingBatch(const Batch& batch);
  // GPU only, before the first training step: the training batches come in
  // the byte `form` (datasets/loader_options.h) and the device makes their
  // floats, normalised with `normalisation`; for Indices, `images` (the
  // training split) is copied to the device now. Throws DeviceError when the
  // device has no room for it.
  void useByteBatches(BatchForm form, const ByteImages& images, const Normalisation& normalisation);
  // GPU only: the device's free memory now, in bytes.
  int64_t freeDeviceBytes() const;
  void queueTrainingPass(const Batch& batch, const BatchStager::Staged& staged, uint64_t seed,
                         float grad_scale, BackwardListener* listener, const StepScalars* step_scalars);
  void doneWithTrainingBatch();
  // GPU only: the loss whose sums the snapshots take.
  DeviceLoss& deviceLoss();
  // For grads()[begin, end): adds the other replicas' gradients into replica 0's,
  // in replica order (so the result does not depend on timing), and zeroes
  // theirs for the next step. Ranges may be processed by different threads.
  void sumGradients(int64_t begin, int64_t end);
  // CPU: the pages of replicas 1..'s gradients [begin, end), zero after
  // sumGradients, go back to the system (core/util/process_memory.h) until
  // backward writes there again: a sharded run's gradients stay resident
  // only where they are being computed or owned.
  void releaseOtherReplicasGradients(int64_t begin, int64_t end);
  // Zeroes every replica's gradient buffer: after a step that failed part way
  // (an elastic run re-forms its group and redoes it).
  void clearGradients();
  // Forward only, inference mode.
  BatchFigures evaluate(const Batch& batch);
  // The data's classes (a language model's vocabulary, which its output may pad).
  int64_t classes() const { return classes_; }
  // 1, or T for a model whose output [T, classes] predicts each position of
  // a sequence (its loss, accuracy and sample counts are then per token).
  int64_t labelsPerSample() const { return labels_per_sample_; }
  // Replica 0's gradient buffer: after sumGradients, the whole batch's gradient.
  // Whoever consumes it zeroes it again before the next trainStep.
  Tensor& grads() { return replicas_[0].grads; }
  // Replica t's gradient buffer (t < threads()).
  const Tensor& replicaGradients(int t) const { return replicas_[static_cast<size_t>(t)].grads; }

 private:
  struct Replica {
    std::unique_ptr<Model> model;
    Tensor grads;
    Tensor dlogits;
    BatchFigures figures;
  };
  BatchFigures runSlices(const Batch& batch, bool training, uint64_t seed, float grad_scale,
                         BackwardListener* listener);
  // The loss gradient's factor for `batch`: grad_scale (1 / the global batch's
  // samples, times fp16's loss scale), or for a per-position model the mean
  // over the global batch's counted labels instead.
  float lossScale(const Batch& batch, float grad_scale) const;
  // Replica t's slice of the batch, on its compute thread.
  void runSlice(const Batch& batch, bool training, uint64_t seed, float grad_scale,
                BackwardListener* listener, int t, bool updates_buffers);
  // The GPU's version: queues every piece; evaluation reads the figures at once.
  BatchFigures runOnDevice(const Batch& batch, bool training, uint64_t seed, float grad_scale,
                           BackwardListener* listener);

  WorkerPool pool_;
  ParamStore store_;
  ParamStore buffers_;
  // Sums batch statistics over the compute threads (null with one replica and
  // no sync across ranks: a lone replica's sums are the batch's).
  std::unique_ptr<BatchStatsReducer> thread_stats_;
  std::unique_ptr<StatsReducer> rank_stats_;  // GPU with sync across ranks
  float label_smoothing_ = 0.0f;
  StepProfile* profile_ = nullptr;
  ParameterGate* gate_ = nullptr;
  std::vector<Replica> replicas_;
  int64_t capacity_;  // samples per replica per pass
  int64_t classes_;
  int64_t micro_batches_ = 1;      // setMicroBatches
  int64_t labels_per_sample_ = 1;  // T when the model predicts every position of a sequence
  int64_t width_ = 0;              // the output's last extent: classes, or a padded vocabulary
  Device device_;
  Tensor device_input_;                  // GPU: the batch's images, copied from the loader
  std::unique_ptr<DeviceLoss> loss_;     // GPU: the loss kernel and its sums
  std::unique_ptr<BatchStager> stager_;  // GPU: training batches' copies on a stream of their own
};

}  // namespace dtrain
