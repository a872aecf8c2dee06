// [strategy] type = "parameter_server": workers compute gradients on their
// slices of the global batch and push them to parameter-server shards, which
// hold the parameters and the optimizer state, placed by size
// (placement.h), and apply the updates; the workers pull the new parameters.
// Synchronous (the consistency built so far): a shard applies update t once
// every worker's push of t has arrived, so training is the same as mirrored's
// with the same global batch, up to the order of the gradient sums.
//
// Runs survive the loss of workers other than the chief ([strategy]
// min_workers): the rendezvous announces the loss, the shards drop the
// worker, and the survivors take over its slices of every global batch
// (slice_handover.h), so no sample is skipped and none is used twice.
// Asynchronous and bounded: from what the shards saw applied of its pushes.
// Synchronous: from the update under way, which waits for its slice; the
// global batch and its slices stay as they were, so the training is the same
// as without the loss up to the order of float sums.
//
// The chief (worker 0) hands the shards their parameters and optimizer state
// when the run starts (its checkpoint's, on a resume) and gathers them back
// for each checkpoint, which holds the same files as every other strategy's.
// The workers' own collectives serve only the start (the chief's state to
// every worker): a synchronous step's figures come summed with the shards'
// answer, batch-norm statistics are averaged through the store, the chief
// evaluates alone, and the workers meet at the end through the store.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <set>
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
  bool evaluatesTogether() const override { return false; }
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
  // Worker `slice`'s slice of global batch `batch`, read with a loader of its own.
  const Batch& readSlice(int64_t batch, int slice);
  // The slice `slice` of global batch `batch`, read and pushed (a lost
  // worker's, taken over).
  BatchFigures pushTakenOver(int64_t batch, int slice, double lr);
  // Synchronous: this worker's slice pushed, then the slices of lost
  // workers it computes in their place, then every shard's answer.
  StepFigures stepTogether(const StepInput& in, int64_t batch);
  void pushOwnSlice(const StepInput& in, int64_t batch);
  // `in`'s gradients computed after backward and pushed whole as worker
  // `slice`'s slice of global batch `batch` (no wait for the answer).
  void computeWholeAndPush(const StepInput& in, int64_t batch, int slice);
  // fp16: the summed gradient `grads` (host memory: the replicas' on the
  // CPU, their host copy on a GPU) divided by the loss scale before it
  // leaves; whether it was finite (its slice's figures tell the shards).
  // True when the loss is not scaled.
  bool unscaleForPush(Tensor& grads);
  // The lost workers' slices of the update under way this worker owns and
  // has not pushed yet, computed and pushed; whether there were any.
  bool pushInPlace();
  // Synchronous: takes in the losses announced (`poll`: ask the store, at
  // most every 200 ms; else only when a shard's answer reported one);
  // whether there were new ones.
  bool takeInLossesTogether(bool poll);
  // On a GPU: the figures of the slices computed since the last call.
  BatchFigures slicesFigures();
  // Every worker says it is done and the chief waits, through the store,
  // for every worker not lost (`take_over`: taking over the slices of
  // workers lost meanwhile, then gathering the shards' state).
  void meetAtEnd(bool take_over);
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
  std::string gradients_described_;
  double part_lr_ = 0;  // the learning rate the parts of this step carry
  Store* store_;
  int64_t pushes_ = 0;  // updates this worker has pushed (the shards' clock of it)
  SliceHandover handover_;
  std::map<int, std::unique_ptr<BatchLoader>> slice_loaders_;  // by slice: lost workers' data
  int64_t last_batch_ = -1;                                    // the latest global batch this worker stepped
  double last_lr_ = 0;
  // Synchronous: the update under way, and the lost workers' slices of it pushed.
  int64_t together_batch_ = 0;
  double together_lr_ = 0;
  std::set<int> pushed_in_place_;
  std::chrono::steady_clock::time_point last_loss_poll_{};
  Tensor host_grads_;  // on a GPU: the host copy of the last slice pushed whole
  Batch slice_data_;
  int64_t buffer_rounds_ = 0;  // agreeOnBuffers calls
  bool drained_ = false;
  bool finished_ = false;
};

}  // namespace dtrain
