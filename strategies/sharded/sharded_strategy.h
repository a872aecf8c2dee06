// [strategy] type = "sharded" (ZeRO, Rajbhandari et al. SC'20; PyTorch FSDP's
// SHARD_GRAD_OP): data parallelism in which each of the N workers keeps only
// 1/N of the training state. Every worker computes the gradients of its slice
// of the global batch, as mirrored's do; the flat layout is cut into N
// contiguous shards (shard_plan.h), and
//  - stage 1: each worker keeps the optimizer state of its shard alone;
//  - stage 2: and of the summed gradients: a bucket's gradients are
//    reduce-scattered as soon as backward has finished it (the buckets and
//    the communication thread of mirrored, OverlappedReducer), and the parts
//    of the bucket other workers own go back to the system at once
//    (core/util/process_memory.h), so the buffer is resident only in this
//    worker's shard and the buckets in flight.
// Then each worker clips (the global norm: the shards' sums of squares
// summed), runs the optimizer over its shard and the updated shards are
// all-gathered, so every worker holds the same whole parameters, as after a
// mirrored step: the same training within float rounding (the sums' order).
// Per worker, fp32 AdamW: mirrored's 16 bytes per parameter become
// 8 + 8/N (stage 1) and 4 + 12/N (stage 2).
//
// With [train] accumulate the micro-batches' gradients add up whole, and are
// reduce-scattered in the last one's backward (FSDP's no_sync). With
// [strategy] sync_batchnorm the statistics use the collectives during the
// passes, so the gradients are reduce-scattered after backward.
//
// Checkpoints stay whole: the optimizer state is streamed to the chief piece
// by piece from the shards that own it (stateViews), never whole on one
// worker, so a resume may change the number of workers, the stage or the
// strategy. A resume's chief reads the whole state and every worker takes
// its shard of it before the first step.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/optim/optimizer.h"
#include "core/train/local_step.h"
#include "core/train/strategy.h"
#include "strategies/gradient_sum.h"
#include "strategies/group_strategy.h"
#include "strategies/sharded/gathered_parameters.h"
#include "strategies/sharded/shard_plan.h"

namespace dtrain {

class ShardedStrategy : public GroupStrategy {
 public:
  ShardedStrategy(int stage, std::shared_ptr<ProcessGroup> group);
  ~ShardedStrategy() override;
  std::string name() const override { return "sharded"; }

  void attach(const TrainingParts& parts) override;
  std::string describeRun() const override;
  StepFigures step(const StepInput& in) override;
  void agreeOnBuffers(ParamStore& buffers) override;
  bool shardsState() const override { return worldSize() > 1; }
  std::vector<NamedTensorView> stateViews(const ParamStore& store) override;

 private:
  // Sums grads[0, n) (a range of replica 0's buffer) over the workers into
  // the parts each owns; the others' parts are zeroed (stage 1) or handed
  // back to the system (stage 2).
  void sumIntoShards(float* grads, int64_t n);
  // Clipping or fp16's overflow check from the global sum of squares, then
  // the optimizer over this worker's shard; its gradients cleared.
  void updateShard(const StepInput& in, StepFigures& out);
  // Every worker's updated shard to every worker.
  void gatherParameters();
  // The floats of this worker's optimizer state (its shard's).
  int64_t optimizerStateFloats() const;
  // Stage 3: the parameters gathered layer group by layer group in the
  // passes (GatheredParameters), which also reduce-scatter the gradients.
  void attachStageThree(const TrainingParts& parts);
  BatchFigures gatherAndCompute(const StepInput& in);
  // State buffer `b`'s floats [begin, begin + count) of the flat layout
  // into `out` on every worker, each part broadcast by its owner.
  void streamStatePiece(size_t b, int64_t begin, int64_t count, float* out);

  int stage_;
  std::unique_ptr<LocalStep> local_;
  std::unique_ptr<GradientSum> gradients_;        // stages 1 and 2
  std::unique_ptr<GatheredParameters> gathered_;  // stage 3
  ShardPlan plan_;
  std::unique_ptr<Optimizer> optimizer_;  // this worker's shard's state
  int64_t grads_peak_bytes_ = 0;          // the gradient buffers' most resident bytes this step
};

}  // namespace dtrain
