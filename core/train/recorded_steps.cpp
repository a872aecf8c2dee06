#include "core/train/recorded_steps.h"

#include "core/backend/device_ops.h"

namespace dtrain {

RecordedSteps::RecordedSteps(ReplicaSet& replicas, Optimizer& optimizer, int64_t batch_size, double clip_norm,
                             std::function<void(const std::string&)> say)
    : replicas_(replicas),
      optimizer_(optimizer),
      batch_size_(batch_size),
      clip_norm_(clip_norm),
      say_(std::move(say)),
      scalars_(StepScalarsBuffer::make(replicas.device())) {}

RecordedSteps::~RecordedSteps() = default;

bool RecordedSteps::takes(const Batch& batch) const {
  return batch.size == batch_size_ && batch.global_size == batch_size_;
}

void RecordedSteps::queue(const Batch& batch, const BatchStager::Staged& staged, uint64_t seed) {
  const StepScalars* on_device = scalars_->onDevice();
  replicas_.queueTrainingPass(batch, staged, seed, 1.0f / static_cast<float>(batch.global_size), nullptr,
                              on_device);
  ParamStore& store = replicas_.store();
  float* grads = replicas_.grads().data();
  if (clip_norm_ > 0) device_ops::clipByNorm(replicas_.device(), grads, store.size(), clip_norm_);
  // lr and step by value are not read: the kernel takes them from on_device.
  StepInfo info{0.0, 1, on_device};
  info.half_copy = replicas_.updatedHalfCopy();  // the fused cast-and-update of a 16-bit precision
  optimizer_.update(store.params().data(), grads, 0, store.size(), info);
  if (info.half_copy.data) replicas_.halfCopyWritten();
  replicas_.grads().zero();
}

void RecordedSteps::run(const Batch& batch, double lr, int64_t step, uint64_t seed) {
  StepScalars scalars;
  scalars.seed = seed;
  scalars.sample_offset = batch.global_offset;
  optimizer_.writeStepScalars(StepInfo{lr, step}, scalars);
  const BatchStager::Staged staged = replicas_.stageTrainingBatch(batch);
  scalars_->upload(scalars);
  DeviceLoss& loss = replicas_.deviceLoss();
  std::unique_ptr<StepGraph>& graph = graphs_[staged.buffer];
  if (graph) {
    graph->launch();
    loss.setQueuedSamples(loss.queuedSamples() + batch.size);  // the replay's loss, unseen by the host
    ++replayed_;
  } else if (!refused_ && ++runs_[staged.buffer] > kCallByCallRuns) {
    const int64_t samples_before = loss.queuedSamples();
    std::string why_not;
    graph = StepGraph::record(
        replicas_.device(), [&] { queue(batch, staged, seed); }, &why_not);
    if (graph) {
      graph->launch();  // recording ran nothing: this is the step
      ++recorded_;
    } else {
      refused_ = true;
      loss.setQueuedSamples(samples_before);  // the recorded loss never ran
      say_("warning: cuda_graphs: the training step could not be recorded as a CUDA graph (" + why_not +
           "); it runs call by call (set [job] cuda_graphs = false to silence this)");
      queue(batch, staged, seed);
    }
  } else {
    queue(batch, staged, seed);
  }
  replicas_.doneWithTrainingBatch();
}

}  // namespace dtrain
