// One pipeline stage in its own process: its layers (a Model per
// micro-batch in flight), its parameters, and its action list run against
// its neighbours over a StageLink (shared memory, or a group's messages).
//
// Between stages c and c + 1 travels a bundle per micro-batch: every result
// of a layer at or before stage c that a layer after it reads (a skip
// connection's tensor is carried through each stage it passes), each tensor
// one message behind its StageMessage header, in the producers' order; back
// come the gradients of the same tensors, summed over everything that read
// them. The numerics are LocalPipeline's (local_pipeline.h): micro-batch m is
// rows [n*m/M, n*(m+1)/M) of this replica's slice, dropout masks follow each
// row's place in the global batch, the loss is scaled by the global batch.
//
// On a GPU the stage's parameters, activations and gradients live in the
// GPU's memory and its layers are the registry's GPU layers; each message is
// copied out of the GPU before it is sent and into it when it arrives
// (staged through host memory, over the same links as CPU stages), or over
// an NCCL link sent from a copy in the GPU's memory and received in place; the
// last stage's loss is queued on the GPU and read once, at the step's end.
//
// Not thread-safe; one step at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/device_loss.h"
#include "core/nn/layer_registry.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"
#include "core/train/replica_set.h"
#include "datasets/batch_loader.h"
#include "strategies/pipeline/schedule.h"
#include "strategies/pipeline/stage_link.h"
#include "strategies/pipeline/stage_message.h"
#include "strategies/pipeline/stage_model.h"

namespace dtrain::pipeline {

// A tensor crossing a cut: the producing layer and its shape per sample.
struct CrossingTensor {
  std::string name;
  Shape shape;
};

// The tensors crossing the cut after stage `cut` (between it and cut + 1),
// in the whole model's topological order.
std::vector<CrossingTensor> crossingTensors(const Model& whole, const std::vector<LayerSpec>& specs,
                                            const std::vector<int>& stage_of, int cut);

class StageWorker {
 public:
  // `registry`: the layers for `device` (layersFor on a GPU).
  StageWorker(const Model& whole, const std::vector<LayerSpec>& specs, const std::vector<int>& stage_of,
              const Schedule& schedule, int stage, int64_t max_micro_batch, int64_t classes,
              const LayerRegistry& registry, const LayerDefaults& defaults, Device device = Device::cpu(),
              float label_smoothing = 0.0f);
  ~StageWorker();

  ParamStore& params() { return store_; }
  ParamStore& buffers() { return buffers_; }
  Tensor& grads() { return grads_; }
  // How errors name each stage ("stage 1 (rank 3)"); by default "stage k".
  void nameStages(std::vector<std::string> names) { stage_names_ = std::move(names); }
  // What the stage holds for them: every copy's activations and gradients.
  int64_t activationBytes() const;
  // Seconds the last step spent computing (forward, backward, the loss), not
  // waiting for messages or its neighbours.
  double busySeconds() const { return busy_s_; }

  // Runs the stage's list for one step: `batch` is this replica's slice of
  // global batch `step`; messages go through `link` (rank k = stage k); the
  // list's AllReduce and Update are `collective`'s. Gradients add to grads().
  // Returns the loss figures (the last stage's; zero elsewhere).
  BatchFigures step(const Batch& batch, int64_t step, uint64_t seed, float grad_scale, StageLink& link,
                    const std::function<void(Op)>& collective);
  // Inference on `batch` (this replica's slice of an evaluation batch) in
  // pieces of the micro-batch size, each forward through the stages in
  // turn; `evaluation` (1, 2, ...) numbers the evaluation batches, which the
  // messages' headers tell from training steps. Returns the loss figures
  // (the last stage's; zero elsewhere).
  BatchFigures evaluate(const Batch& batch, int64_t evaluation, StageLink& link);
  // The bytes a step receives at most from stage - 1 (activations) and from
  // stage + 1 (gradients), headers included.
  int64_t stepBytesFromBefore() const { return stepBytes(in_cut_); }
  int64_t stepBytesFromAfter() const { return stepBytes(out_cut_); }

 private:
  using Bundle = std::map<std::string, Tensor>;
  void forward(int m);
  // What goes on to the next stage after micro-batch m's forward: the
  // stage's results of `out` (its model's outputs), and what passes through.
  Bundle onward(int m, const std::vector<const Tensor*>& out) const;
  // Micro-batch m's backward, or one of a split one's two passes (schedule.h).
  void backward(int m, BackwardPart part);
  // Frees micro-batch m's model copy and inputs once its backward is done.
  void release(int m);
  void send(Direction d, int m, int to, const std::vector<CrossingTensor>& what, const Bundle& from);
  Bundle receive(Direction d, int m, int from, const std::vector<CrossingTensor>& what);
  std::pair<int64_t, int64_t> rows(int m) const;  // [begin, end) of micro-batch m
  // Micro-batch m's inputs to the stage's model: its samples, or what crossed the cut.
  std::vector<const Tensor*> inputsOf(int m);
  // Micro-batch m's loss at the last stage, into figures_ (on a GPU queued,
  // read at the end); dlogits (nullable) gets its gradient times grad_scale.
  void addLoss(const Tensor& logits, int m, float grad_scale, float* dlogits, float smoothing);
  const Tensor& images(int m);  // micro-batch m's samples on the device, kept until its backward
  std::string stageName(int stage) const;
  int64_t stepBytes(const std::vector<CrossingTensor>& bundle) const;
  // Runs one message's transfer; a failure names the peer stage and what moved.
  template <typename Transfer>
  void transfer(const StageMessage& what, int peer, Transfer&& run);

  int stage_, stages_, micro_batches_;
  int64_t classes_;
  Device device_;
  float label_smoothing_;
  std::unique_ptr<DeviceLoss> loss_;  // the last stage's, on a GPU
  std::vector<Action> actions_;
  std::vector<std::string> stage_names_;
  StagePart part_;
  std::vector<std::string> out_names_;  // the models' outputs() by name
  std::vector<CrossingTensor> in_cut_, out_cut_;
  std::vector<std::unique_ptr<Model>> models_;
  ParamStore store_, buffers_;
  Tensor grads_;
  std::vector<bool> busy_;

  // The step under way.
  const Batch* batch_ = nullptr;
  int64_t step_ = 0;
  uint64_t seed_ = 0;
  float grad_scale_ = 1;
  StageLink* link_ = nullptr;
  int64_t max_rows_ = 0;
  bool evaluating_ = false;  // rows() cuts the batch in pieces of max_rows_
  BatchFigures figures_;
  double busy_s_ = 0;
  std::map<int, size_t> model_of_;                      // micro-batch -> model copy
  std::map<int, Tensor> images_;                        // stage 0's inputs, on the device
  std::map<int, Bundle> received_, sent_on_;            // activations in, and out
  std::map<int, Bundle> gradients_in_, gradients_out_;  // gradients of out_cut_, of in_cut_
  std::map<int, Tensor> dlogits_;
  std::vector<std::vector<uint8_t>> outbox_;  // sends in flight until the step ends
  std::vector<Tensor> device_outbox_;         // the same, on the GPU, for a link that takes device memory
};

}  // namespace dtrain::pipeline
