// Sums batch-norm statistics over the replicas that compute one batch: the
// compute threads of this process (so statistics are those of the rank's
// whole batch, whatever the thread count) and, with [strategy]
// sync_batchnorm, every rank (through a rank-level sum: Strategy::reduceFigures).
//
// Each training pass, the threads with samples take part; every one of them
// calls allReduceSum at the same layers in the same order. The last to arrive
// sums the threads' vectors in thread order (so the result does not depend on
// timing), adds the other ranks' when asked, and releases the others.
//
// Threading: beginPass() and abort() from the thread that runs the pass; the
// replicas' reducers from the compute threads. A failure in any thread must be
// followed by abort(), which makes waiting threads throw instead of hanging.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/nn/layer.h"

namespace dtrain {

class BatchStatsReducer {
 public:
  // Sums a host vector over the ranks in place (null: this rank only).
  using RankSum = std::function<void(double* data, int64_t n)>;

  // `replicas`: the compute threads that may take part.
  BatchStatsReducer(int replicas, RankSum rank_sum);
  BatchStatsReducer(const BatchStatsReducer&) = delete;
  BatchStatsReducer& operator=(const BatchStatsReducer&) = delete;

  // Before a training pass: which replicas compute samples in it.
  void beginPass(const std::vector<bool>& taking_part);
  // Wakes every waiting replica with an Error; until the next beginPass.
  void abort();
  // The reducer replica `index` hands its layers (LayerContext::stats_reducer).
  StatsReducer* forReplica(int index) { return &views_[static_cast<size_t>(index)]; }

 private:
  class ReplicaView : public StatsReducer {
   public:
    ReplicaView(BatchStatsReducer* owner, int index) : owner_(owner), index_(index) {}
    void allReduceSum(double* data, int64_t n) override { owner_->reduce(index_, data, n); }

   private:
    BatchStatsReducer* owner_;
    int index_;
  };

  void reduce(int index, double* data, int64_t n);

  RankSum rank_sum_;
  std::vector<ReplicaView> views_;
  std::vector<std::vector<double>> slots_;  // each replica's vector of the current call
  std::vector<bool> taking_part_;
  std::vector<double> result_;
  std::mutex mutex_;
  std::condition_variable released_;
  int participants_ = 0;
  int arrived_ = 0;
  uint64_t generation_ = 0;  // completed calls
  bool aborted_ = false;
};

}  // namespace dtrain
