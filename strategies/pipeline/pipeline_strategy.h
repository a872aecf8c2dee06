// [strategy] type = "pipeline": the model's layers split into `stages`
// stages, one process each, the global batch's slice of each replica cut into
// `micro_batches` micro-batches that flow through the stages as the schedule
// (gpipe or 1f1b) orders them; `replicas` copies of the pipeline train on
// slices of the global batch, each stage's gradients summed over its
// replicas. Rank r runs stage r % stages of replica r / stages; rank 0 (stage
// 0 of replica 0) is the chief.
//
// Every process keeps the whole model's tensors (the trainer's ReplicaSet
// and optimizer, in host memory even on a GPU) but trains only its stage's
// (a StageWorker, on the job's device); before a
// checkpoint the stages' parameters, running statistics (averaged over the
// replicas) and optimizer state are gathered into every rank's whole copy,
// so the chief writes the same checkpoint files as every other strategy.
// Evaluation runs through the stages as training does, forward only, each
// replica on its slice of every test batch in pieces of a micro-batch.
//
// Groups: `all` (every rank: broadcasts, figures, the clipping norm) and
// `replicas_of_stage` (this stage in every replica: its gradients'
// all-reduce; null with one replica). The stage-to-stage messages go through
// shared memory, or with a Gloo [strategy] collective over a group of the
// replica's stages (stage_link.h).
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/comm/store.h"
#include "core/optim/optimizer.h"
#include "core/train/strategy.h"
#include "strategies/pipeline/pipeline_plan.h"
#include "strategies/pipeline/stage_worker.h"

namespace dtrain::pipeline {

// A stage's tensor: where it sits in the whole model's layout and in the
// stage's own, and its size.
struct PlacedTensor {
  int64_t whole = 0, own = 0, numel = 0;
};

class PipelineStrategy : public Strategy {
 public:
  // `link_group`: the replica's stages (rank = stage) to carry the messages,
  // or null for shared memory, set up at attach through `store` under
  // `shm_prefix`.
  PipelineStrategy(const StrategySection& cfg, std::shared_ptr<ProcessGroup> all,
                   std::shared_ptr<ProcessGroup> link_group, std::shared_ptr<ProcessGroup> replicas_of_stage,
                   Store* store, std::string shm_prefix, std::chrono::milliseconds timeout);
  ~PipelineStrategy() override;

  std::string name() const override { return "pipeline"; }
  int rank() const override { return all_->rank(); }
  int worldSize() const override { return all_->size(); }
  Shard dataShard() const override { return Shard{replica(), cfg_.replicas}; }
  void broadcastParameters(float* params, int64_t n) override;
  void broadcastFromChief(void* data, int64_t bytes) override;
  void reduceFigures(double* values, int64_t n) override;

  void attach(const TrainingParts& parts) override;
  std::string describeRun() const override;
  StepFigures step(const StepInput& in) override;
  // Evaluation runs through the stages too, each replica on its slice of
  // every test batch: no rank needs the whole model for it.
  bool evaluatesTogether() const override { return true; }
  bool evaluatesBatches() const override { return true; }
  // On a GPU only the stage's tensors take its memory.
  bool keepsWholeModelOnHost() const override { return true; }
  BatchFigures evaluateBatch(const Batch& batch) override;
  // Gathers every stage's parameters, statistics and optimizer state into
  // the whole copies on every rank.
  void agreeOnBuffers(ParamStore& buffers) override;

  int stage() const { return rank() % cfg_.stages; }
  int replica() const { return rank() / cfg_.stages; }

 private:
  // Clipping, fp16's unscaling and overflow check (agreed over every rank),
  // the update; `out` hears the loss scale.
  void update(const StepInput& in, StepFigures& out);
  // Each stage's values, from its first replica, into every rank's whole copies.
  void gather();
  // This rank's stage of `plan`: its worker, link, optimizer and values,
  // taken from the whole copies.
  void buildStages(const PipelinePlan& plan);
  // Sums the gradients of each weight shared across stages (SharedWeight)
  // into every copy of it: a collective of every rank, before the update.
  void meetSharedGradients();
  // Re-plans the automatic split with the layers' costs scaled to what each
  // stage measured, and moves the cuts when the slowest stage gains.
  void rebalance(int64_t step);

  // A new split is taken when its slowest stage is predicted below this
  // share of the slowest now.
  static constexpr double kRebalanceGain = 0.99;

  StrategySection cfg_;
  std::shared_ptr<ProcessGroup> all_, link_group_, replicas_of_stage_;
  Store* store_;
  std::string shm_prefix_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<StageLink> link_;
  TrainingParts parts_;
  LayerRegistry layers_;          // the layers for the job's device
  std::vector<LayerCost> costs_;  // per layer of the whole model, for the split
  std::vector<int> stage_of_;     // per layer: the split running now
  int builds_ = 0;                // stages built so far (names each build's rings)
  int steps_run_ = 0;             // since attach, until the rebalance
  int64_t steps_timed_ = 0;
  std::vector<double> busy_seconds_;  // per stage, summed over its replicas and the steps timed
  bool rebalanced_ = false;
  int64_t evaluations_ = 0;  // evaluation batches so far (their messages' number)
  std::unique_ptr<StageWorker> worker_;
  std::unique_ptr<Optimizer> optimizer_;  // the stage's parameters only
  // Per stage: its parameters and buffers (own: offsets in that stage's stores).
  std::vector<std::vector<PlacedTensor>> params_of_, buffers_of_;
  // Weights shared across stages (SharedWeight), in the same order on every
  // rank: their size, and where this stage holds a copy (own < 0: it holds none).
  std::vector<PlacedTensor> shared_;
  // The copies this stage borrows: the owner's place in the whole model, the
  // copy's in this stage's store (taken in, never gathered out).
  std::vector<PlacedTensor> borrowed_;
  std::string layout_;                   // the stage table, for the start-up line
  std::vector<float> activation_bytes_;  // per rank, in MB: what its stage holds
};

}  // namespace dtrain::pipeline
