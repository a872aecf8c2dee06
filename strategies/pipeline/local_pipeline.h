// A pipeline's stages run in this process, one after another, as their
// schedule's action lists order them: what the multi-process strategy does
// across processes, with the messages kept in memory. It pins down the
// numerics the distributed pipeline must reproduce: a global batch cut into
// micro-batches (rows [n*m/M, n*(m+1)/M), so the last may be smaller), each
// stage a Model per micro-batch in flight (the schedule's peak), dropout
// masks from each row's place in the global batch, the loss of every
// micro-batch scaled by the global batch's size, and each stage's gradients
// summed over the micro-batches: the same update as the unpipelined step's,
// up to the order of float sums. Batch norm normalises per micro-batch.
//
// Not thread-safe; one step at a time.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/nn/layer_registry.h"
#include "core/nn/model.h"
#include "core/nn/param_store.h"
#include "core/train/replica_set.h"
#include "datasets/batch_loader.h"
#include "strategies/pipeline/schedule.h"
#include "strategies/pipeline/stage_model.h"

namespace dtrain::pipeline {

class LocalPipeline {
 public:
  // `whole`: the model built from `specs`; `stage_of`: the stage of each of
  // its nodes; `max_micro_batch`: the most rows a micro-batch may hold.
  LocalPipeline(const Model& whole, const std::vector<LayerSpec>& specs, const std::vector<int>& stage_of,
                const Schedule& schedule, int64_t max_micro_batch, int64_t classes,
                const LayerRegistry& registry, const LayerDefaults& defaults);

  int stages() const { return static_cast<int>(stages_.size()); }
  // Stage k's parameters (ParamStore::allocate done) and its gradient buffer,
  // which step() adds to and the caller clears.
  ParamStore& params(int stage) { return stages_[static_cast<size_t>(stage)]->store; }
  Tensor& grads(int stage) { return stages_[static_cast<size_t>(stage)]->grads; }

  // Forward and backward of every micro-batch of `batch` (the whole global
  // batch) as the schedule orders them, the gradients scaled by
  // `grad_scale`; the loss figures of all micro-batches.
  BatchFigures step(const Batch& batch, uint64_t seed, float grad_scale);

 private:
  struct Stage {
    StagePart part;
    std::vector<std::string> out_names;          // its results out, in outputs() order
    std::vector<std::unique_ptr<Model>> models;  // one per micro-batch in flight
    ParamStore store, buffers;
    Tensor grads;
    std::map<int, size_t> model_of;  // micro-batch -> the model holding its activations
    std::vector<bool> busy;
  };
  void forward(int s, int m, const Batch& batch, uint64_t seed, float grad_scale, BatchFigures& figures);
  // `part`: the whole backward, or one of a split one's two passes (schedule.h).
  void backward(int s, int m, const Batch& batch, uint64_t seed, BackwardPart part);
  std::pair<int64_t, int64_t> rows(int m, int64_t n) const;  // [begin, end) of micro-batch m
  // Micro-batch m's inputs to `stage`'s model: its `images`, or what earlier stages sent on.
  std::vector<const Tensor*> inputsOf(const Stage& stage, int m, const Tensor& images) const;

  Schedule schedule_;
  std::vector<std::pair<int, size_t>> order_;  // (stage, action), as checkSchedule ran them
  int64_t classes_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::string last_name_;  // the model's output layer
  // Per micro-batch: the results the stages sent on (by layer name), and the
  // gradients sent back for them, summed over the stages that read them.
  std::map<std::pair<int, std::string>, Tensor> sent_, returned_;
  std::map<int, Tensor> dlogits_;
};

}  // namespace dtrain::pipeline
