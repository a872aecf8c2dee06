// [strategy] type = "parameter_server": workers compute gradients on their
// slices of the global batch and push them to parameter-server shards, which
// hold the parameters and the optimizer state, placed by size
// (placement.h), and apply the updates; the workers pull the new parameters.
// Synchronous (the consistency built so far): a shard applies update t once
// every worker's push of t has arrived, so training is the same as mirrored's
// with the same global batch, up to the order of the gradient sums.
//
// Asynchronous and bounded runs survive the loss of workers other than the
// chief ([strategy] min_workers): the rendezvous announces the loss, the
// shards drop the worker and publish what its pushes covered, and the
// survivors take over its remaining slices of every global batch
// (slice_handover.h), so no sample is skipped and none is used twice.
//
// The chief (worker 0) hands the shards their parameters and optimizer state
// when the run starts (its checkpoint's, on a resume) and gathers them back
// for each checkpoint, which holds the same files as every other strategy's.
// Figures, broadcasts and batch-norm statistics go through the workers' own
// collectives; the shards take no part in them.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/comm/store.h"
#include "core/train/local_step.h"
#include "core/train/strategy.h"
#include "strategies/gradient_sum.h"
#include "strategies/parameter_server/placement.h"
#include "strategies/parameter_server/shard_clients.h"
#include "strategies/parameter_server/slice_handover.h"

namespace dtrain {

class ParameterServerStrategy : public Strategy {
 public:
  // `workers`: the workers' collectives; `shard_endpoints`: where each shard
  // listens; `generation`: the run's rendezvous generation; `store`: the
  // run's (where losses are announced), kept alive by the caller.
  ParameterServerStrategy(std::shared_ptr<ProcessGroup> workers, std::vector<std::string> shard_endpoints,
                          uint64_t generation, double timeout_s, std::string consistency, Store* store);
  ~ParameterServerStrategy() override;

  std::string name() const override { return "parameter_server"; }
  int rank() const override { return workers_->rank(); }
  int worldSize() const override { return workers_->size(); }
  void broadcastParameters(float* params, int64_t n) override { workers_->broadcast(params, n, 0); }
  void broadcastFromChief(void* data, int64_t bytes) override;
  void reduceFigures(double* values, int64_t n) override { workers_->allReduceSum(values, n); }

  // Places the variables, prints the placement (chief) and, on the chief,
  // hands the shards their state; the workers meet after it.
  void attach(const TrainingParts& parts) override;
  std::string describeRun() const override;
  StepFigures step(const StepInput& in) override;
  // Synchronous updates step together; asynchronous and bounded ones do not.
  bool lockstep() const override { return consistency_ == "sync"; }
  void agreeOnBuffers(ParamStore& buffers) override;
  void collectState(ParamStore& params, Optimizer& optimizer) override;
  // Workers at their own pace: each says it is done and waits (taking over
  // the slices of workers lost meanwhile) until every worker is done or lost.
  void drainUpdates() override;
  // The workers meet; the chief stops the shards.
  void finish() override;

 private:
  bool syncsBatchStats() const;
  // The last step's staleness (max and mean over the shards) and each
  // shard's traffic, for metrics.jsonl.
  std::vector<std::pair<std::string, double>> measuredFigures() const;
  // The gradients of `in`'s batch (worker `slice`'s slice of global batch
  // `batch`), pushed to the shards as this worker's next update; the
  // parameters answered are taken.
  BatchFigures computeAndPush(const StepInput& in, int64_t batch, int slice);
  // The slice `slice` of global batch `batch`, read and pushed (a lost
  // worker's, taken over).
  BatchFigures pushTakenOver(int64_t batch, int slice, double lr);
  // Takes in the losses announced since the last call (`poll`: ask the
  // store even when no shard has reported one) and catches up on the slices
  // of batches up to `upto` they handed to this worker.
  BatchFigures takeOverLosses(int64_t upto, double lr, bool poll);

  std::shared_ptr<ProcessGroup> workers_;
  std::vector<std::string> endpoints_;
  uint64_t generation_;
  double timeout_s_;
  std::string consistency_;
  int slow_ms_ = 0;  // test hook: this worker sleeps before each step (DTRAIN_TEST_SLOW_WORKER=rank:ms)
  std::unique_ptr<LocalStep> local_;
  ShardPlacement placement_;
  std::unique_ptr<ShardClients> shards_;
  std::unique_ptr<GradientSum> gradients_;  // sync on the CPU: pushes in parts during backward
  double part_lr_ = 0;                      // the learning rate the parts of this step carry
  Store* store_;
  int64_t pushes_ = 0;  // updates this worker has pushed (the shards' clock of it)
  SliceHandover handover_;
  std::map<int, std::unique_ptr<BatchLoader>> slice_loaders_;  // by slice: lost workers' data
  int64_t last_batch_ = -1;                                    // the latest global batch this worker stepped
  double last_lr_ = 0;
  bool drained_ = false;
  bool finished_ = false;
};

}  // namespace dtrain
