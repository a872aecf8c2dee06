// The gradients of a step summed over the worker processes, for the
// strategies whose workers step together over a ProcessGroup (mirrored,
// central_storage): while backward runs, bucket by bucket (the buckets of
// gradient_buckets.h, reduced in order by an OverlappedReducer as soon as
// every replica has finished their layers), or, with [strategy]
// sync_batchnorm, after backward (the statistics then use the collectives
// during the passes). Where the sum goes is the strategy's: every worker
// (all-reduce) or one (a reduce onto the holder of the variables).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "core/comm/process_group.h"
#include "core/train/local_step.h"
#include "strategies/overlapped_reducer.h"

namespace dtrain {

class GradientSum {
 public:
  // Sums grads[0, n) of this worker with the others' (collective).
  using Sum = std::function<void(float* grads, int64_t n)>;

  // With several workers and no sync_batchnorm, the sum travels during
  // backward; with sync_batchnorm the replicas are set to sum their batch
  // statistics over `workers` instead.
  GradientSum(LocalStep& local, ProcessGroup& workers, Sum sum);
  ~GradientSum();

  // Whether the batch statistics are summed over the workers.
  bool syncsBatchStats() const { return syncs_batch_stats_; }
  // Forward, backward and the sum over the replicas and the workers; returns
  // this worker's figures.
  BatchFigures compute(const StepInput& in);
  // "in 3 buckets during backward" or "after backward", for the start-up line.
  std::string describe() const;

 private:
  LocalStep& local_;
  Sum sum_;
  bool syncs_batch_stats_;
  std::unique_ptr<OverlappedReducer> reducer_;  // null with sync_batchnorm or one worker
};

}  // namespace dtrain
